package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/layerfs/layerfs/object"
)

// The queries that read an object and the ownerships recorded for a
// version, newest first.
const (
	getQuery   = `SELECT kind, size, enc, base, data FROM objects WHERE id = ?`
	blameQuery = `SELECT data, commit_id FROM blame WHERE path = ? AND content = ? ORDER BY seq DESC LIMIT 16`
)

// readStmts are the hot read queries, prepared once: preparing a
// statement costs more than running it.
type readStmts struct {
	get, has, hasMany, depth, branch, blame, layerSeq, many, run *sql.Stmt
}

func (s *Store) prepareStmts() error {
	return prepareAll(s.r, []stmtSQL{
		{&s.stmts.get, getQuery},
		{&s.stmts.has, `SELECT 1 FROM objects WHERE id = ?`},
		{&s.stmts.hasMany, hasManyQuery},
		{&s.stmts.depth, `SELECT depth FROM objects WHERE id = ?`},
		{&s.stmts.branch, `SELECT name, head, start, created, updated FROM branches WHERE name = ?`},
		{&s.stmts.blame, blameQuery},
		{&s.stmts.layerSeq, `SELECT layer, commit_id, created FROM manifest WHERE seq = ?`},
		{&s.stmts.many, manyQuery},
		{&s.stmts.run, runQuery},
	})
}

func (r *readStmts) close() {
	closeAll(r.get, r.has, r.hasMany, r.depth, r.branch, r.blame, r.layerSeq, r.many, r.run)
}

// stmtSQL is a statement to prepare and where to keep it.
type stmtSQL struct {
	st  **sql.Stmt
	sql string
}

// prepareAll prepares each statement on db.
func prepareAll(db *sql.DB, qs []stmtSQL) error {
	for _, q := range qs {
		var err error
		if *q.st, err = db.Prepare(q.sql); err != nil {
			return fmt.Errorf("prepare %q: %w", q.sql, err)
		}
	}
	return nil
}

// closeAll closes the statements that were prepared.
func closeAll(sts ...*sql.Stmt) {
	for _, st := range sts {
		if st != nil {
			st.Close()
		}
	}
}

// storedObject is one row of the objects table, still encoded.
//
// rowsAreFresh: the modernc driver copies every blob it returns into a new
// slice (conn.columnBlob), so bytes scanned as sql.RawBytes stay valid
// after the row is released and need no second copy; reading a raw chunk
// then costs one copy, not two. TestRawBytesAreFresh guards this.
type storedObject struct {
	kind object.Kind
	size int
	enc  int
	base sql.RawBytes
	data sql.RawBytes
}

// withRow reads object id's row and calls fn with it, without copying the
// stored bytes out of SQLite first.
func (s *Store) withRow(get *sql.Stmt, id object.ID, fn func(o *storedObject) error) error {
	rows, err := get.Query(id[:])
	if err != nil {
		return fmt.Errorf("read object %s: %w", id.Short(), err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read object %s: %w", id.Short(), err)
		}
		if s.changedSinceOpen() {
			return fmt.Errorf("object %s: %w", id.Short(), ErrStoreChanged)
		}
		return fmt.Errorf("object %s: %w", id.Short(), ErrMissingObject)
	}
	var o storedObject
	if err := rows.Scan(&o.kind, &o.size, &o.enc, &o.base, &o.data); err != nil {
		return fmt.Errorf("read object %s: %w", id.Short(), err)
	}
	return fn(&o)
}

// Get returns the canonical bytes of object id, which must be of kind k.
// The bytes are verified against id; a mismatch is ErrCorrupt.
func (s *Store) Get(id object.ID, k object.Kind) ([]byte, error) {
	return s.getKind(s.stmts.get, id, k)
}

// getKind is get for an object that must be of kind k.
func (s *Store) getKind(get *sql.Stmt, id object.ID, k object.Kind) ([]byte, error) {
	if k == object.KindExtent {
		if data, ok := s.cachedExtent(id); ok {
			return data, nil
		}
	}
	data, kind, err := s.get(get, id, maxDeltaDepth+1)
	if err != nil {
		return nil, err
	}
	if kind != k {
		return nil, wrongKind(id, kind, k)
	}
	if k == object.KindExtent {
		s.extents.add(id, bytes.Clone(data))
	}
	return data, nil
}

// GetAny returns an object's canonical bytes and kind.
func (s *Store) GetAny(id object.ID) ([]byte, object.Kind, error) {
	return s.get(s.stmts.get, id, maxDeltaDepth+1)
}

// get reads an object through the statement get (a reader's, or the
// writer's).
func (s *Store) get(get *sql.Stmt, id object.ID, budget int) ([]byte, object.Kind, error) {
	var raw []byte
	var kind object.Kind
	var delta *storedObject // copied out: its base is read after the row is released
	err := s.withRow(get, id, func(o *storedObject) error {
		kind = o.kind
		switch o.enc {
		case encRaw:
			raw = o.data // the driver's own copy: see rowsAreFresh
		case encDelta:
			delta = &storedObject{kind: o.kind, size: o.size, enc: o.enc, base: bytes.Clone(o.base), data: bytes.Clone(o.data)}
		default:
			var err error
			if raw, err = s.codec.decode(o.enc, o.data, nil, o.size); err != nil {
				return fmt.Errorf("object %s: decode: %v: %w", id.Short(), err, ErrCorrupt)
			}
		}
		return nil
	})
	if err == nil && delta != nil {
		raw, err = s.undelta(get, id, delta, budget)
	}
	if err != nil {
		return nil, 0, err
	}
	if object.Sum(kind, raw) != id {
		return nil, 0, fmt.Errorf("object %s: stored bytes do not hash to its id: %w", id.Short(), ErrCorrupt)
	}
	return raw, kind, nil
}

// undelta rebuilds a delta-encoded object from its base, which is read (and
// verified) in turn; budget bounds the chain.
func (s *Store) undelta(get *sql.Stmt, id object.ID, o *storedObject, budget int) ([]byte, error) {
	if budget <= 1 {
		return nil, fmt.Errorf("object %s: delta chain too deep: %w", id.Short(), ErrCorrupt)
	}
	baseID, err := object.FromBytes(o.base)
	if err != nil {
		return nil, fmt.Errorf("object %s: delta base: %w", id.Short(), ErrCorrupt)
	}
	base, _, err := s.get(get, baseID, budget-1)
	if err != nil {
		return nil, fmt.Errorf("object %s: delta base: %w", id.Short(), err)
	}
	raw, err := s.codec.decode(o.enc, o.data, base, o.size)
	if err != nil {
		return nil, fmt.Errorf("object %s: decode delta: %v: %w", id.Short(), err, ErrCorrupt)
	}
	return raw, nil
}

// Has reports whether object id is stored.
func (s *Store) Has(id object.ID) (bool, error) {
	var one int
	err := s.stmts.has.QueryRow(id[:]).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// objectDepth returns a stored object's delta depth, for choosing bases.
func (s *Store) objectDepth(ctx context.Context, id object.ID) (int, bool) {
	var depth int
	err := s.stmts.depth.QueryRowContext(ctx, id[:]).Scan(&depth)
	return depth, err == nil
}

func wrongKind(id object.ID, got, want object.Kind) error {
	return fmt.Errorf("object %s is a %s, want a %s: %w", id.Short(), got, want, ErrCorrupt)
}
