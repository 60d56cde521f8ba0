package store

import (
	"database/sql"
	"errors"
	"fmt"

	"github.com/layerfs/layerfs/object"
)

// Owners of lines that no Commit claims.
const (
	// OwnerOriginal: the line came with init.
	OwnerOriginal = "original"
	// OwnerUnknown: the Commit that wrote the line did not record its
	// ownership (its audit append failed).
	OwnerUnknown = "unknown"
)

// Ownership says who wrote each line of one version of a file: runs of
// lines, each with an owner (an origin, or OwnerOriginal/OwnerUnknown).
// A binary file has one run covering the whole file.
type Ownership struct {
	Binary bool
	Runs   []Run
}

// Run is Lines consecutive lines with one owner.
type Run struct {
	Lines int
	Owner string
}

// Lines is the number of lines covered.
func (o *Ownership) Lines() int {
	n := 0
	for _, r := range o.Runs {
		n += r.Lines
	}
	return n
}

// BlameRow records the ownership of the content a Commit left at a path.
type BlameRow struct {
	Path    string
	Content object.ID
	Commit  object.ID
	Own     Ownership
}

func (o *Ownership) encode() []byte {
	var owners []string
	index := map[string]uint64{}
	e := object.Encoder{}
	if o.Binary {
		e.Byte(1)
	} else {
		e.Byte(0)
	}
	var runs object.Encoder
	for _, r := range o.Runs {
		i, ok := index[r.Owner]
		if !ok {
			i = uint64(len(owners))
			index[r.Owner] = i
			owners = append(owners, r.Owner)
		}
		runs.Uvarint(uint64(r.Lines))
		runs.Uvarint(i)
	}
	e.Uvarint(uint64(len(owners)))
	for _, s := range owners {
		e.String(s)
	}
	e.Uvarint(uint64(len(o.Runs)))
	e.B = append(e.B, runs.B...)
	return e.B
}

func decodeOwnership(b []byte) (Ownership, error) {
	d := object.Decoder{B: b}
	o := Ownership{Binary: d.Byte() == 1}
	n := d.Uvarint()
	if n > uint64(len(b)) {
		return o, ErrCorrupt
	}
	owners := make([]string, n)
	for i := range owners {
		owners[i] = d.String()
	}
	runs := d.Uvarint()
	if runs > uint64(len(b)) {
		return o, ErrCorrupt
	}
	for i := uint64(0); i < runs && d.Err() == nil; i++ {
		lines, idx := d.Uvarint(), d.Uvarint()
		if idx >= uint64(len(owners)) {
			return o, ErrCorrupt
		}
		o.Runs = append(o.Runs, Run{Lines: int(lines), Owner: owners[idx]})
	}
	return o, d.Done()
}

// errAuditInjected lets tests make audit appends fail.
var errAuditInjected = errors.New("audit append failed (injected)")

// AppendBlame records line ownership for the paths a Commit changed, in a
// transaction of its own after the Commit landed.
func (s *Store) AppendBlame(rows []BlameRow) error {
	if len(rows) == 0 {
		return nil
	}
	if s.failAudit.Load() {
		return errAuditInjected
	}
	return s.Update(func(tx *RefTx) error { return tx.insertBlame(rows) })
}

// AppendBlame records line ownership within the transaction that lands the
// Commit, after its objects and refs: one transaction instead of two. A
// failure rolls back only the ownership rows (a savepoint), so the Commit
// still lands and its lines read unknown.
func (t *RefTx) AppendBlame(rows []BlameRow) error {
	if len(rows) == 0 {
		return nil
	}
	if t.s.failAudit.Load() {
		return errAuditInjected
	}
	if len(rows) == 1 {
		// One statement: a failure rolls back that statement alone.
		return t.insertBlame(rows)
	}
	if _, err := t.tx.ExecContext(t.ctx, `SAVEPOINT blame`); err != nil {
		return fmt.Errorf("append blame: %w", err)
	}
	if err := t.insertBlame(rows); err != nil {
		if _, rerr := t.tx.ExecContext(t.ctx, `ROLLBACK TO blame`); rerr != nil {
			return fmt.Errorf("%w; roll back: %v", err, rerr)
		}
		t.tx.ExecContext(t.ctx, `RELEASE blame`)
		return err
	}
	_, err := t.tx.ExecContext(t.ctx, `RELEASE blame`)
	return err
}

func (t *RefTx) insertBlame(rows []BlameRow) error {
	ins := stmt(t.ctx, t.tx, t.s.wstmts.insertBlame)
	for _, r := range rows {
		if _, err := ins.ExecContext(t.ctx, r.Path, r.Content[:], r.Commit[:], r.Own.encode()); err != nil {
			return fmt.Errorf("append blame %s: %w", r.Path, err)
		}
	}
	return nil
}

// OwnerRow is one recorded ownership of a version: who owns its lines, as
// the Commit that recorded it saw them. The same content can be written
// again, by another Commit (a revert, or another branch), with owners of
// its own.
type OwnerRow struct {
	Own    Ownership
	Commit object.ID
}

// Blame returns the ownerships recorded for content at path, newest first
// (at most 16).
func (s *Store) Blame(path string, content object.ID) ([]OwnerRow, error) {
	return s.blame(s.stmts.blame, path, content)
}

func (s *Store) blame(query *sql.Stmt, path string, content object.ID) ([]OwnerRow, error) {
	rows, err := query.Query(path, content[:])
	if err != nil {
		return nil, fmt.Errorf("blame %s: %w", path, err)
	}
	defer rows.Close()
	var out []OwnerRow
	for rows.Next() {
		var data, commit []byte
		if err := rows.Scan(&data, &commit); err != nil {
			return nil, fmt.Errorf("blame %s: %w", path, err)
		}
		o, err := decodeOwnership(data)
		if err != nil {
			return nil, fmt.Errorf("blame %s: %w", path, err)
		}
		id, _ := object.FromBytes(commit)
		out = append(out, OwnerRow{Own: o, Commit: id})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("blame %s: %w", path, err)
	}
	return out, nil
}

// FailAuditForTest makes AppendBlame fail until called with false: a
// failure point for tests of the "commit stands, lines read unknown" rule.
func (s *Store) FailAuditForTest(fail bool) { s.failAudit.Store(fail) }
