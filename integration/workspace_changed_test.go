package integration

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/publish"
	"github.com/layerfs/layerfs/sessions"
)

// TestCommitOfAFileChangedWhileRead: a big file that shrinks or grows
// through the Workspace's host path (an editor that had it open for
// writing before the commit began, which keeps the commit from making
// that path read-only; or a command a commit with allow_running left at
// work) while the commit reads it fails the
// commit with 409 file_changed naming the file, and publishes nothing;
// the commit failed with "big.bin: diff: read at N: EOF" (internal, 500).
// Committing again takes the file as it is then. The second round edits
// the file after a commit made it a data file (on the daemon's volume),
// so that it is copied up by cloning and compared by block maps.
func TestCommitOfAFileChangedWhileRead(t *testing.T) {
	for _, volume := range []string{"", sessions.VolumeOff} {
		t.Run("volume="+volume, func(t *testing.T) {
			old := make([]byte, 3<<20)
			rand.New(rand.NewSource(5)).Read(old)
			d := startDaemon(t, map[string]string{"big.bin": string(old)}, sessions.Config{Volume: volume})
			w := d.create(t, "main")
			host := filepath.Join(w.HostPath, "big.bin")
			want := string(old)
			for round, change := range []func(f *os.File) error{
				func(f *os.File) error { return f.Truncate(1 << 20) },
				func(f *os.File) error { _, err := f.WriteAt([]byte("grown"), 1<<20+100); return err },
			} {
				d.sh(t, w.ID, "printf edited | dd of=big.bin bs=1 seek=5000 conv=notrunc 2>/dev/null")
				f, err := os.OpenFile(host, os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				var armed atomic.Bool
				armed.Store(true)
				publish.SetAfterStatForTest(func(path string) {
					if path != "big.bin" || !armed.CompareAndSwap(true, false) {
						return
					}
					if err := change(f); err != nil {
						t.Errorf("change big.bin at the host path: %v", err)
					}
				})
				t.Cleanup(func() { publish.SetAfterStatForTest(nil) })
				rec := httptest.NewRecorder()
				d.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/workspaces/"+w.ID+"/commit", strings.NewReader("{}")))
				f.Close()
				var e api.Error
				json.NewDecoder(rec.Body).Decode(&e)
				if rec.Code != http.StatusConflict || e.Code != api.CodeChanged || !strings.Contains(e.Error, "big.bin: the file changed while the commit read it") {
					t.Fatalf("round %d: commit of a file changed while read: %d %+v; want 409 %s naming big.bin", round, rec.Code, e, api.CodeChanged)
				}
				if got := d.read(t, "main", "big.bin"); got != want {
					t.Fatalf("round %d: the refused commit changed main's big.bin (%d bytes, want %d)", round, len(got), len(want))
				}
				publish.SetAfterStatForTest(nil)
				now, err := os.ReadFile(host)
				if err != nil {
					t.Fatal(err)
				}
				d.commit(t, w.ID, api.StatusCommitted)
				if got := d.read(t, "main", "big.bin"); !bytes.Equal([]byte(got), now) {
					t.Fatalf("round %d: committed again: main's big.bin has %d bytes, want the file's %d", round, len(got), len(now))
				}
				want = string(now)
			}
		})
	}
}
