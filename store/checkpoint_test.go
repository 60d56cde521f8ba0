package store

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/layerfs/layerfs/object"
)

// TestWALStaysBounded: under writes that never pause, passive checkpoints
// never let a writer start the WAL over; past walMax the checkpointer
// restarts it, so the file stops growing.
func TestWALStaysBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 48 MiB")
	}
	path := filepath.Join(t.TempDir(), "s.layerfs")
	s, err := Open(path, Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const limit = 2 << 20
	s.ckpt.walMax = limit
	var largest int64
	for i := 0; i < 3072; i++ { // 48 MiB, in 16 KiB commits
		b := s.NewBatch()
		if _, err := b.Put(object.KindChunk, randBytes(int64(i), 16<<10)); err != nil {
			t.Fatal(err)
		}
		if err := b.Flush(); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(path + "-wal"); err == nil {
			largest = max(largest, fi.Size())
		}
	}
	// Past the limit, the writes of one checkpoint's interval and those
	// made while the restart waits for its turn may still land.
	if bound := int64(limit + 4*checkpointBytes); largest > bound {
		t.Errorf("the WAL grew to %d bytes; want at most %d", largest, bound)
	}
	var n int
	s.r.QueryRow(`SELECT count(*) FROM objects`).Scan(&n)
	if n != 3072 {
		t.Errorf("%d objects, want 3072", n)
	}
}
