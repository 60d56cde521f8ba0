package store

import (
	"database/sql"
	"fmt"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/layerfs/layerfs/object"
)

// TestWALWritesGathered: the writer's WAL writes reach the file in a few
// large writes, none is left in a buffer once a commit returns, and each
// commit is at once visible to a reader on another connection.
func TestWALWritesGathered(t *testing.T) {
	s := NewTestStore(t)
	other, err := Open(s.Path(), Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	writes, flushes := walVFS.writes.Load(), walVFS.flushes.Load()
	for i := range 50 {
		data := []byte(fmt.Sprintf("object %d", i))
		st := s.NewStage()
		id, err := st.Put(object.KindChunk, data)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Update(func(tx *RefTx) error { tx.Write(st); return nil }); err != nil {
			t.Fatal(err)
		}
		if n := walVFS.pending.Load(); n != 0 {
			t.Fatalf("commit %d: %d WAL buffers still hold bytes", i, n)
		}
		got, err := other.Get(id, object.KindChunk)
		if err != nil || string(got) != string(data) {
			t.Fatalf("commit %d read from another connection: %q, %v", i, got, err)
		}
	}
	writes, flushes = walVFS.writes.Load()-writes, walVFS.flushes.Load()-flushes
	if writes == 0 || flushes == 0 || flushes*4 > writes {
		t.Errorf("%d WAL writes reached the file in %d writes; want them gathered", writes, flushes)
	}
}

// TestWALSpillRollback: a transaction that spills pages to the WAL and
// then rolls back leaves nothing behind that a later writer — on another
// connection that writes directly, or this one — trips over, and the
// database reads back whole, from the WAL and after a checkpoint.
func TestWALSpillRollback(t *testing.T) {
	if err := registerWALVFS(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "spill.db")
	open := func(vfs string) *sql.DB {
		q := url.Values{}
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "cache_size(10)")
		q.Add("_pragma", "busy_timeout(5000)")
		if vfs != "" {
			q.Set("vfs", vfs)
		}
		db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		t.Cleanup(func() { db.Close() })
		return db
	}
	gathered, direct := open(walVFSName), open("")
	exec := func(db *sql.DB, q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(gathered, `CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB)`)
	row := make([]byte, 3000)
	before := walVFS.writes.Load()
	tx, err := gathered.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 500 { // ~1.5 MB through a 10-page cache: it spills
		if _, err := tx.Exec(`INSERT INTO t(v) VALUES(?)`, row); err != nil {
			t.Fatalf("insert %d: %v", i, err)
		}
	}
	if walVFS.writes.Load() == before {
		t.Fatal("the transaction wrote nothing to the WAL before its end: no spill to test")
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		exec(direct, `INSERT INTO t(k, v) VALUES(?, ?)`, 1000+i, row)
		exec(gathered, `INSERT INTO t(k, v) VALUES(?, ?)`, 2000+i, row)
	}
	verify := func(when string, db *sql.DB) {
		t.Helper()
		var check string
		if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
			t.Fatalf("%s: integrity_check: %q, %v", when, check, err)
		}
		var n, sum int
		if err := db.QueryRow(`SELECT count(*), sum(k) FROM t`).Scan(&n, &sum); err != nil {
			t.Fatal(err)
		}
		if want := 20*1000 + 20*2000 + 2*190; n != 40 || sum != want {
			t.Errorf("%s: %d rows, keys summing to %d; want 40 and %d", when, n, sum, want)
		}
	}
	verify("from the WAL", open(""))
	gathered.Close()
	direct.Close()
	verify("after the checkpoint", open(""))
}
