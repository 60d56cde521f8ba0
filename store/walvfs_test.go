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
// then rolls back — with the disk full, so what it gathered cannot be
// written — leaves nothing behind that a later writer, on another
// connection that writes directly or this one, trips over (a lock kept,
// stale frames), and the database reads back whole, from the WAL and
// after a checkpoint.
func TestWALSpillRollback(t *testing.T) {
	gathered, direct, dbPath := walTestDBs(t, 10)
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
	// The disk is full as it rolls back: the spilled frames can't be
	// written, which must not keep the WAL-index write lock held.
	walVFS.failFlush.Store(true)
	tx.Rollback()
	walVFS.failFlush.Store(false)
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
	verify("from the WAL", openTestDB(t, dbPath, "", 10))
	gathered.Close()
	direct.Close()
	verify("after the checkpoint", openTestDB(t, dbPath, "", 10))
}

// TestWALCommitsNeverLeftGathered: whatever size a transaction is (its
// commit frame anywhere in the buffer, or just past its end) and whoever
// wrote the WAL last (another connection: this one's next frame header is
// written through), nothing is left gathered once a commit returns; and a
// flush that fails fails the commit, which leaves the database as it was.
func TestWALCommitsNeverLeftGathered(t *testing.T) {
	gathered, direct, _ := walTestDBs(t, 2000) // nothing spills
	exec := func(db *sql.DB, q string, args ...any) error {
		_, err := db.Exec(q, args...)
		return err
	}
	if err := exec(gathered, `CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB)`); err != nil {
		t.Fatal(err)
	}
	row := make([]byte, 3000) // a page a row
	late := walVFS.late.Load()
	k := 0
	for i := 0; i < 140; i++ {
		rows := 1 + i/2
		if i%2 == 1 {
			// Another connection writes: this one's next frame header,
			// here a one-frame transaction's commit frame, is written
			// through.
			k++
			if err := exec(direct, `INSERT INTO t(k, v) VALUES(?, ?)`, k, row); err != nil {
				t.Fatal(err)
			}
			if err := exec(gathered, `UPDATE t SET v = ? WHERE k = ?`, row[1:], k); err != nil {
				t.Fatal(err)
			}
		}
		tx, err := gathered.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for range rows {
			k++
			if _, err := tx.Exec(`INSERT INTO t(k, v) VALUES(?, ?)`, k, row); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatalf("%d rows: %v", rows, err)
		}
		if n := walVFS.pending.Load(); n != 0 {
			t.Fatalf("a commit of %d rows left %d WAL buffers holding bytes", rows, n)
		}
		if walVFS.late.Load() != late {
			t.Fatalf("a commit of %d rows still had bytes gathered when SQLite published it", rows)
		}
	}
	walVFS.failFlush.Store(true)
	err := exec(gathered, `INSERT INTO t(k, v) VALUES(?, ?)`, -1, row)
	walVFS.failFlush.Store(false)
	if err == nil {
		t.Fatal("a commit whose WAL write failed succeeded")
	}
	var n, sum int
	if err := direct.QueryRow(`SELECT count(*), sum(k) FROM t`).Scan(&n, &sum); err != nil {
		t.Fatal(err)
	}
	if n != k || sum != k*(k+1)/2 {
		t.Errorf("%d rows summing to %d; want %d rows summing to %d", n, sum, k, k*(k+1)/2)
	}
	if err := exec(gathered, `INSERT INTO t(k, v) VALUES(?, ?)`, k+1, row); err != nil {
		t.Fatalf("a commit after the failed one: %v", err)
	}
	var check string
	if err := direct.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check: %q, %v", check, err)
	}
}

// walTestDBs opens a new database twice: through the writer's VFS and
// through SQLite's own, each a single connection with a cache of
// cachePages pages.
func walTestDBs(t *testing.T, cachePages int) (gathered, direct *sql.DB, path string) {
	t.Helper()
	if err := registerWALVFS(); err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), "wal.db")
	return openTestDB(t, path, walVFSName, cachePages), openTestDB(t, path, "", cachePages), path
}

func openTestDB(t *testing.T, p, vfs string, cachePages int) *sql.DB {
	t.Helper()
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)") // as a Store: no sync flushes a commit
	q.Add("_pragma", fmt.Sprintf("cache_size(%d)", cachePages))
	q.Add("_pragma", "busy_timeout(5000)")
	if vfs != "" {
		q.Set("vfs", vfs)
	}
	db, err := sql.Open("sqlite", "file:"+p+"?"+q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}
