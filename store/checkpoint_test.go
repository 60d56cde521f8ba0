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
// writes to pause, or, once the publish of a Stage that spilled packs ends
// the run, only for the commit to settle. Other publishes do not end it.
func TestCheckpointAfterRun(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "s.layerfs"), Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// publish publishes a Stage of size bytes of chunks, if any: past
	// stageSpill, the Stage spills packs of its own.
	publish := func(size int) {
		t.Helper()
		st := s.NewStage()
		for i := 0; i < size; i += 16 << 10 {
			if _, err := st.PutChunk(randBytes(int64(size+i), 16<<10), object.Zero); err != nil {
				t.Fatal(err)
			}
		}
		if size > stageSpill {
			// As Publish does with a big Stage: its spills are written
			// before the ref transaction.
			if err := st.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		err := s.Update(func(tx *RefTx) error {
			if size > 0 {
				tx.Write(st)
			}
			return tx.SetLease("ws-1", MainBranch, "test", object.Zero)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	s.ckpt.wrote(largeWrite) // a spill of a run
	if _, wait := s.ckpt.due(); wait <= 0 {
		t.Fatalf("after a large write: wait %v, want the quiet still to come", wait)
	}
	publish(0) // another Workspace's Lease: the run goes on
	if _, wait := s.ckpt.due(); wait <= checkpointSettle {
		t.Fatalf("after a ref transaction without a Stage: wait %v, want the quiet still to come", wait)
	}
	publish(64 << 10) // another Workspace's small commit: the run goes on
	if _, wait := s.ckpt.due(); wait <= checkpointSettle {
		t.Fatalf("after a Stage that spilled nothing: wait %v, want the quiet still to come", wait)
	}
	publish(3 << 20) // a big file's: spilled, and published
	if _, wait := s.ckpt.due(); wait > checkpointSettle {
		t.Errorf("after the spilling Stage's publish: wait %v, want at most %v", wait, checkpointSettle)
	}
}

// TestCloseCheckpointsBesideAReader: a writer that closes before its
// checkpointer's delay copies what it wrote into the database file even
// when another connection (a mount's read-only Store) stays open, so
// SQLite's checkpoint at the last close does not happen. Without it,
// short-lived writers beside a mount grew the WAL without end.
func TestCloseCheckpointsBesideAReader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.layerfs")
	s, err := Open(path, Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	r, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Branches(); err != nil { // its connection is open now
		t.Fatal(err)
	}
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ { // three short-lived writers, as CLI commands are
		w, err := Open(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		b := w.NewBatch()
		if _, err := b.Put(object.KindChunk, randBytes(int64(i), 512<<10)); err != nil {
			t.Fatal(err)
		}
		if err := b.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if grown := after.Size() - before.Size(); grown < 1<<20 {
		t.Errorf("the database file grew %d bytes after 1.5 MiB was written and the writers closed; want it checkpointed", grown)
	}
}
