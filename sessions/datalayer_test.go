package sessions

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/layerfs/layerfs/object"
)

// TestDataLayerEvict: past its byte budget the data layer drops the least
// recently announced data files, but never one announced since the oldest
// live overlay was mounted; a reopened layer finds the files kept.
func TestDataLayerEvict(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".data")
	l, err := openDataLayer(dir, 250)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]object.ID, 4)
	for i := range ids {
		ids[i] = object.Sum(object.KindChunk, []byte{byte(i)})
		tmp := filepath.Join(dir, "tmp", "t"+string(rune('a'+i)))
		if err := os.WriteFile(tmp, make([]byte, 100), 0o400); err != nil {
			t.Fatal(err)
		}
		l.keep([]clone{{tmp: tmp, id: ids[i], size: 100}})
	}
	if n, bytes := l.stats(); n != 4 || bytes != 400 {
		t.Fatalf("kept %d files, %d bytes; want 4, 400", n, bytes)
	}
	if got := l.redirect(ids[0]); got != "/"+ids[0].String() {
		t.Fatalf("redirect = %q", got)
	}
	announced := time.Now()
	time.Sleep(time.Millisecond)
	l.redirect(ids[2])
	l.redirect(ids[3])
	// An overlay mounted before ids[2] and ids[3] were announced may have
	// them looked up: only ids[0] (announced before it) and ids[1] (never
	// announced) may go, and going over budget does not change that.
	l.evict(announced)
	for i, want := range []bool{false, false, true, true} {
		if got := l.DataFile(ids[i]) != ""; got != want {
			t.Errorf("after evict, file %d kept = %v, want %v", i, got, want)
		}
		if _, err := os.Stat(l.path(ids[i])); (err == nil) != want {
			t.Errorf("after evict, file %d on disk: %v, want %v", i, err, want)
		}
	}
	// With a smaller budget, once no overlay is older than the
	// announcements, the older of the two goes.
	l.max = 150
	l.evict(time.Now())
	if l.DataFile(ids[2]) != "" || l.DataFile(ids[3]) == "" {
		t.Error("evict did not drop the least recently announced file first")
	}
	if _, bytes := l.stats(); bytes != 100 {
		t.Errorf("%d bytes after evict, budget 150", bytes)
	}
	// Unknown content has no data file; a reopened layer finds ids[3].
	if l.redirect(object.Sum(object.KindChunk, []byte("other"))) != "" {
		t.Error("a redirect for content without a data file")
	}
	l2, err := openDataLayer(dir, 250)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := l2.stats(); n != 1 || l2.DataFile(ids[3]) == "" {
		t.Errorf("reopened: %d files", n)
	}
}
