package store

import (
	"context"
	"database/sql"

	"github.com/layerfs/layerfs/object"
)

// writeStmts are the statements every commit runs, prepared once on the
// writer connection: compiling a statement costs more than running it, and
// a commit runs about ten. A transaction uses them through stmt.
type writeStmts struct {
	insertPack, insertObject, sealPack, head, setHead, insertBlame *sql.Stmt
	// A Workspace's create, commit and end each move a lease; a commit on
	// main appends a layer.
	setLease, dropLease, nextLayer, insertLayer *sql.Stmt
	// get and blame read for a writer (see WriterReads).
	get, blame *sql.Stmt
}

func (s *Store) prepareWriteStmts() error {
	if s.w == nil {
		return nil
	}
	return prepareAll(s.w, []stmtSQL{
		{&s.wstmts.insertPack, `INSERT INTO packs(created) VALUES(?)`},
		{&s.wstmts.insertObject, `INSERT INTO objects(id, kind, size, enc, base, depth, pack, data) VALUES(?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO NOTHING`},
		{&s.wstmts.sealPack, `UPDATE packs SET sealed = 1, objects = ?, raw_bytes = ?, stored_bytes = ? WHERE id = ?`},
		{&s.wstmts.head, `SELECT head FROM branches WHERE name = ?`},
		{&s.wstmts.setHead, `UPDATE branches SET head = ?, updated = ? WHERE name = ? AND head = ?`},
		{&s.wstmts.insertBlame, `INSERT INTO blame(path, content, commit_id, data) VALUES(?, ?, ?, ?)`},
		{&s.wstmts.setLease, `INSERT INTO leases(id, commit_id, branch, holder, created, updated) VALUES(?, ?, ?, ?, ?, ?)
			ON CONFLICT(id) DO UPDATE SET commit_id = excluded.commit_id, branch = excluded.branch, holder = excluded.holder, updated = excluded.updated`},
		{&s.wstmts.dropLease, `DELETE FROM leases WHERE id = ?`},
		{&s.wstmts.nextLayer, `SELECT coalesce(max(seq), 0) + 1 FROM manifest`},
		{&s.wstmts.insertLayer, `INSERT INTO manifest(seq, layer, commit_id, created) VALUES(?, ?, ?, ?)`},
		{&s.wstmts.get, getQuery},
		{&s.wstmts.blame, blameQuery},
	})
}

func (w *writeStmts) close() {
	closeAll(w.insertPack, w.insertObject, w.sealPack, w.head, w.setHead, w.insertBlame, w.get, w.blame,
		w.setLease, w.dropLease, w.nextLayer, w.insertLayer)
}

// stmt binds a prepared statement to tx. The writer has one connection, so
// the statement is already prepared on it and is reused, not recompiled.
func stmt(ctx context.Context, tx *sql.Tx, st *sql.Stmt) *sql.Stmt {
	return tx.StmtContext(ctx, st)
}

// WriterReads is the Store read through the writer connection, for a
// writer's own reads on its way to publish (the versions a commit
// replaces, their line owners). A reader connection that finds the WAL
// grown since its last read — after every commit — drops its page cache
// and its mapping of the file before it reads; the writer connection
// wrote those pages itself. Reads wait while another of this Store's
// writers holds the connection, so never read through it inside Update:
// that would wait for itself. A read-only Store reads as usual.
type WriterReads struct{ s *Store }

// writerIdle reports whether the writer's connection was free a moment
// ago: a hint, for reads that would rather ask a reader than wait.
func (s *Store) writerIdle() bool { return s.w != nil && s.w.Stats().InUse == 0 }

// WriterReads returns the Store read through the writer connection.
func (s *Store) WriterReads() WriterReads { return WriterReads{s} }

// Get is Store.Get through the writer connection.
func (w WriterReads) Get(id object.ID, k object.Kind) ([]byte, error) {
	if w.s.w == nil {
		return w.s.Get(id, k)
	}
	return w.s.getKind(w.s.wstmts.get, id, k)
}

// GetManyInto is Store.GetManyInto: those reads go through the Store's raw
// reader connections, whose dropping of their page cache after a commit
// costs little against the many objects a call reads.
func (w WriterReads) GetManyInto(ids []object.ID, k object.Kind, alloc func(n int) []byte, fn func(id object.ID, data []byte, err error)) error {
	return w.s.GetManyInto(ids, k, alloc, fn)
}

// Blame is Store.Blame through the writer connection.
func (w WriterReads) Blame(path string, content object.ID) ([]OwnerRow, error) {
	if w.s.w == nil {
		return w.s.Blame(path, content)
	}
	return w.s.blame(w.s.wstmts.blame, path, content)
}
