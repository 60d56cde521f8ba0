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

// TestCheckpointAfterRun: after a large write the checkpointer waits for
// writes to pause, or, once a Stage's publish ends the run, only for the
// commit to settle.
func TestCheckpointAfterRun(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "s.layerfs"), Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	publish := func(stage bool) {
		t.Helper()
		err := s.Update(func(tx *RefTx) error {
			if stage {
				st := s.NewStage()
				if _, err := st.Put(object.KindChunk, []byte("the run's last object")); err != nil {
					return err
				}
				tx.Write(st)
			}
			return tx.SetLease("ws-1", MainBranch, "test", object.Zero)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	s.ckpt.wrote(largeWrite) // a spill of the run
	if _, wait := s.ckpt.due(); wait <= 0 {
		t.Fatalf("after a large write: wait %v, want the quiet still to come", wait)
	}
	publish(false) // another Workspace's Lease: the run goes on
	if _, wait := s.ckpt.due(); wait <= 0 {
		t.Fatalf("after a ref transaction without a Stage: wait %v, want the quiet still to come", wait)
	}
	publish(true)
	if _, wait := s.ckpt.due(); wait > checkpointSettle {
		t.Errorf("after the Stage's publish: wait %v, want at most %v", wait, checkpointSettle)
	}
}
