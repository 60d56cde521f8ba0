package store

import (
	"context"
	"database/sql"
	"fmt"
)

// writeStmts are the statements every commit runs, prepared once on the
// writer connection: compiling a statement costs more than running it, and
// a commit runs about ten. A transaction uses them through stmt.
type writeStmts struct {
	insertPack, insertObject, sealPack, head, setHead, insertBlame *sql.Stmt
}

func (s *Store) prepareWriteStmts() error {
	if s.w == nil {
		return nil
	}
	for _, q := range []struct {
		st  **sql.Stmt
		sql string
	}{
		{&s.wstmts.insertPack, `INSERT INTO packs(created) VALUES(?)`},
		{&s.wstmts.insertObject, `INSERT INTO objects(id, kind, size, enc, base, depth, pack, data) VALUES(?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO NOTHING`},
		{&s.wstmts.sealPack, `UPDATE packs SET sealed = 1, objects = ?, raw_bytes = ?, stored_bytes = ? WHERE id = ?`},
		{&s.wstmts.head, `SELECT head FROM branches WHERE name = ?`},
		{&s.wstmts.setHead, `UPDATE branches SET head = ?, updated = ? WHERE name = ? AND head = ?`},
		{&s.wstmts.insertBlame, `INSERT INTO blame(path, content, commit_id, data) VALUES(?, ?, ?, ?)`},
	} {
		var err error
		if *q.st, err = s.w.Prepare(q.sql); err != nil {
			return fmt.Errorf("prepare %q: %w", q.sql, err)
		}
	}
	return nil
}

func (w *writeStmts) close() {
	for _, st := range []*sql.Stmt{w.insertPack, w.insertObject, w.sealPack, w.head, w.setHead, w.insertBlame} {
		if st != nil {
			st.Close()
		}
	}
}

// stmt binds a prepared statement to tx. The writer has one connection, so
// the statement is already prepared on it and is reused, not recompiled.
func stmt(ctx context.Context, tx *sql.Tx, st *sql.Stmt) *sql.Stmt {
	return tx.StmtContext(ctx, st)
}
