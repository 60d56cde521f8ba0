package store

import (
	"bytes"
	"os"
	"testing"

	"github.com/layerfs/layerfs/object"
)

// ckptStore is a Store holding n random chunks of 16 KiB, written but
// not yet checkpointed (the checkpointer is stopped), and their IDs and
// bytes.
func ckptStore(t *testing.T, n int) (*Store, []object.ID, [][]byte) {
	t.Helper()
	s := NewTestStore(t)
	s.ckpt.stop()
	s.ckpt = nil
	var ids []object.ID
	var data [][]byte
	b := s.NewBatch()
	for i := range n {
		d := randBytes(int64(1000+i), 16<<10)
		id, err := b.Put(object.KindChunk, d)
		if err != nil {
			t.Fatal(err)
		}
		ids, data = append(ids, id), append(data, d)
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	return s, ids, data
}

// checkAfterCheckpoint checkpoints the whole WAL and empties it (so that
// every read after comes from the database file), then checks the file
// and reads every chunk back from a fresh connection.
func checkAfterCheckpoint(t *testing.T, s *Store, ids []object.ID, data [][]byte) {
	t.Helper()
	var busy, frames, copied int
	if err := s.w.QueryRow(`PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &frames, &copied); err != nil || busy != 0 {
		t.Fatalf("checkpoint: busy %d, %v", busy, err)
	}
	var ok string
	if err := s.w.QueryRow(`PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("integrity_check: %q, %v", ok, err)
	}
	other, err := Open(s.Path(), Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for i, id := range ids {
		got, err := other.Get(id, object.KindChunk)
		if err != nil || !bytes.Equal(got, data[i]) {
			t.Fatalf("chunk %d after the checkpoint: %d bytes, %v", i, len(got), err)
		}
	}
}

// TestCheckpointWritesGathered: a checkpoint of 8 MiB of new chunks writes
// the database file and reads the WAL in a few large calls, and the file
// holds every page afterwards.
func TestCheckpointWritesGathered(t *testing.T) {
	s, ids, data := ckptStore(t, 512)
	writes, flushes, ahead := dbFiles.writes.Load(), dbFiles.flushes.Load(), dbFiles.aheadReads.Load()
	checkAfterCheckpoint(t, s, ids, data)
	writes, flushes, ahead = dbFiles.writes.Load()-writes, dbFiles.flushes.Load()-flushes, dbFiles.aheadReads.Load()-ahead
	if writes < 2048 || flushes*64 > writes {
		t.Errorf("the checkpoint's %d page writes reached the file in %d writes; want them gathered", writes, flushes)
	}
	if ahead < writes/2 {
		t.Errorf("%d of the checkpoint's %d page reads came from the read-ahead", ahead, writes)
	}
	if n := dbFiles.inCkpt.Load(); n != 0 {
		t.Errorf("%d database files still in a checkpoint after it", n)
	}
}

// TestCheckpointUnreserved: when the space a checkpoint grows the file by
// cannot be reserved (a full disk), its writes go through one by one, as
// SQLite's own VFS makes them, and the file is whole afterwards.
func TestCheckpointUnreserved(t *testing.T) {
	s, ids, data := ckptStore(t, 128)
	dbFiles.failReserve.Store(true)
	defer dbFiles.failReserve.Store(false)
	flushes := dbFiles.flushes.Load()
	checkAfterCheckpoint(t, s, ids, data)
	if n := dbFiles.flushes.Load() - flushes; n != 0 {
		t.Errorf("%d gathered writes after a failed reservation; want none", n)
	}
}

// TestCheckpointFlushFailure: gathered writes that fail mid-checkpoint
// (2 MiB of chunks fill the buffer twice) fail the checkpoint, which
// SQLite then leaves to the next: no page is recorded as copied that the
// file lacks.
func TestCheckpointFlushFailure(t *testing.T) {
	s, ids, data := ckptStore(t, 128)
	dbFiles.failFlush.Store(true)
	var busy, frames, copied int
	err := s.w.QueryRow(`PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied)
	dbFiles.failFlush.Store(false)
	if err == nil && copied == frames {
		t.Fatalf("a checkpoint whose writes failed copied all %d frames", frames)
	}
	checkAfterCheckpoint(t, s, ids, data)
}

// TestCheckpointReadsAheadInOrderOnly: a checkpoint of many small
// commits, whose pages are scattered over the WAL, reads ahead less than
// the WAL holds (a read-ahead at every out-of-order frame read 11 MB of a
// 6 MB WAL).
func TestCheckpointReadsAheadInOrderOnly(t *testing.T) {
	s := NewTestStore(t)
	s.ckpt.stop()
	s.ckpt = nil
	var ids []object.ID
	var data [][]byte
	for i := range 300 {
		d := randBytes(int64(5000+i), 2<<10)
		st := s.NewStage()
		id, err := st.Put(object.KindChunk, d)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Update(func(tx *RefTx) error { tx.Write(st); return nil }); err != nil {
			t.Fatal(err)
		}
		ids, data = append(ids, id), append(data, d)
	}
	fi, err := os.Stat(s.Path() + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	ahead := dbFiles.aheadBytes.Load()
	checkAfterCheckpoint(t, s, ids, data)
	if read := dbFiles.aheadBytes.Load() - ahead; read > fi.Size() {
		t.Errorf("the checkpoint of a %d-byte WAL read %d bytes ahead", fi.Size(), read)
	}
}
