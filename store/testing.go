package store

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/layerfs/layerfs/object"
)

// NewTestStore creates an empty Store in a test's temporary directory. When
// the test ends, the Store is checked with Fsck and closed.
func NewTestStore(t testing.TB) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "test.layerfs"), Options{Create: true, Durability: Fast})
	if err != nil {
		t.Fatalf("open test store: %v", err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			if rep, err := s.Fsck(); err != nil || !rep.OK() {
				t.Errorf("fsck after test: %v %s", err, rep.Summary())
			}
		}
		s.Close()
	})
	return s
}

// CorruptObject flips one byte of an object's stored bytes in the Store
// file itself, as bit rot would, bypassing SQLite (whose triggers refuse
// the update). The Store must be closed; the WAL is checkpointed first.
func CorruptObject(t testing.TB, path string, id object.ID) {
	t.Helper()
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("corrupt object: %v", err)
	}
	var data []byte
	if err := s.r.QueryRow(`SELECT data FROM objects WHERE id = ?`, id[:]).Scan(&data); err != nil {
		t.Fatalf("corrupt object %s: %v", id.Short(), err)
	}
	if _, err := s.w.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	s.Close()
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// A large row continues on overflow pages, so look for its first bytes,
	// which SQLite keeps in the row's own cell. Stale copies may linger in
	// free space after SQLite moved the cell; flip the byte in each.
	probe := data[:min(len(data), 64)]
	if len(probe) < 16 || !bytes.Contains(file, probe) {
		t.Fatalf("corrupt object %s: its stored bytes are not found in the file", id.Short())
	}
	for at := 0; ; {
		i := bytes.Index(file[at:], probe)
		if i < 0 {
			break
		}
		file[at+i+len(probe)/2] ^= 0x5a
		at += i + len(probe)
	}
	if err := os.WriteFile(path, file, 0o644); err != nil {
		t.Fatal(err)
	}
}
