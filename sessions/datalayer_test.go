package sessions

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/publish"
)

// TestDataLayerEvict: past its byte budget the data layer drops the least
// recently announced data files, never one announced since the oldest
// live overlay was mounted, and keeps no more than twice its budget; a
// reopened layer finds the files kept.
func TestDataLayerEvict(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".data")
	l, err := openDataLayer(dir, 240, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	clone := func(i int) publish.Clone {
		tmp := filepath.Join(dir, "tmp", "t"+string(rune('a'+i)))
		if err := os.WriteFile(tmp, make([]byte, 100), 0o400); err != nil {
			t.Fatal(err)
		}
		return publish.Clone{Tmp: tmp, ID: object.Sum(object.KindChunk, []byte{byte(i)})}
	}
	ids := make([]object.ID, 6)
	for i := range 5 {
		c := clone(i)
		ids[i] = c.ID
		l.keep([]publish.Clone{c})
	}
	// Five of 100 bytes would be 500, over twice the budget (480): the
	// fifth was not kept, and its clone is gone.
	if n, bytes := l.stats(); n != 4 || bytes != 400 {
		t.Fatalf("kept %d files, %d bytes; want 4, 400", n, bytes)
	}
	if l.DataFile(ids[4]) != "" {
		t.Error("kept a file past twice the budget")
	}
	if left, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(left) != 0 {
		t.Errorf("clones left in tmp: %v", left)
	}
	if got := l.redirect(ids[0], 100); got != "/"+ids[0].String() {
		t.Fatalf("redirect = %q", got)
	}
	if got := l.redirect(ids[0], 101); got != "" {
		t.Fatalf("redirect of content of another size = %q", got)
	}
	mounted := l.tick() // an overlay mounted now
	l.redirect(ids[2], 100)
	l.redirect(ids[3], 100)
	// The overlay mounted before ids[2] and ids[3] were announced may
	// have them looked up: only ids[1] (kept before it, never announced
	// since) and ids[0] (announced before it) may go, and both must to be
	// within budget.
	l.evict(mounted)
	for i, want := range []bool{false, false, true, true} {
		if got := l.DataFile(ids[i]) != ""; got != want {
			t.Errorf("after evict, file %d kept = %v, want %v", i, got, want)
		}
		if _, err := os.Stat(l.path(ids[i])); (err == nil) != want {
			t.Errorf("after evict, file %d on disk: %v, want %v", i, err, want)
		}
	}
	if _, bytes := l.stats(); bytes != 200 {
		t.Errorf("%d bytes after evict; want 200", bytes)
	}
	// The overlay is gone; with a smaller budget, the less recently
	// announced of the two goes.
	l.max = 150
	l.evict(l.tick())
	if l.DataFile(ids[2]) != "" || l.DataFile(ids[3]) == "" {
		t.Error("evict did not drop the least recently announced file first")
	}
	// Content without a data file has no redirect; a reopened layer finds
	// the files kept.
	if l.redirect(object.Sum(object.KindChunk, []byte("other")), 100) != "" {
		t.Error("a redirect for content without a data file")
	}
	l2, err := openDataLayer(dir, 150, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := l2.stats(); n != 1 || l2.DataFile(ids[3]) == "" {
		t.Errorf("reopened: %d files", n)
	}
	// Data files of a layer made under other rules (no version, or
	// another) are not trusted.
	if err := os.WriteFile(filepath.Join(dir, dataVersionFile), []byte("1"), 0o600); err != nil {
		t.Fatal(err)
	}
	l3, err := openDataLayer(dir, 150, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := l3.stats(); n != 0 {
		t.Errorf("a layer of version 1 kept %d files", n)
	}
	if _, err := os.Stat(l3.path(ids[3])); err == nil {
		t.Error("a version 1 data file is still on disk")
	}
}
