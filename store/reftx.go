package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/layerfs/layerfs/object"
)

// MainBranch is the branch whose commits are published as Layers.
const MainBranch = "main"

// RefTx is one short write transaction over the refs: read heads, move
// branches, append Layers, and store the few small objects (a commit, a
// layer) that must land with them. It holds SQLite's write lock, so keep the
// work inside it small: write bulk objects in a Batch first.
type RefTx struct {
	s      *Store
	ctx    context.Context
	tx     *sql.Tx
	objs   []*pendingObject
	stages []stageCount
	now    int64
}

// Update runs fn in one BEGIN IMMEDIATE transaction and commits it when fn
// returns nil. Another writer (in any process) waits its turn.
func (s *Store) Update(fn func(tx *RefTx) error) error {
	if err := s.writable(); err != nil {
		return err
	}
	ctx := context.Background()
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	rt := &RefTx{s: s, ctx: ctx, tx: tx, now: time.Now().UnixNano()}
	// Leases released lately (DropLeaseSoon) go with this transaction; if
	// it does not commit, with a later one.
	drops := s.drops.take(false)
	committed := false
	defer func() {
		if !committed {
			s.putBackLeaseDrops(drops)
		}
	}()
	if err := rt.writeLeaseDrops(drops); err != nil {
		return err
	}
	if err := fn(rt); err != nil {
		return err
	}
	if err := rt.flushObjects(); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	committed = true
	rt.countStages()
	s.rememberExtents(rt.objs)
	s.wrote(rt.storedBytes(), false)
	for _, sc := range rt.stages {
		if sc.st.spilled() {
			// The publish of a Stage that spilled packs: its run of
			// large writes is over.
			s.ckpt.runEnded()
			break
		}
	}
	return nil
}

// Put stores a small object within the transaction.
func (t *RefTx) Put(k object.Kind, raw []byte) object.ID {
	o := &pendingObject{id: object.Sum(k, raw), kind: k, raw: raw}
	o.enc, o.data = t.s.codec.compress(raw, k)
	t.objs = append(t.objs, o)
	return o.id
}

// storedBytes is how many stored bytes the transaction's objects hold.
func (t *RefTx) storedBytes() int64 {
	var n int64
	for _, o := range t.objs {
		n += int64(len(o.data))
	}
	return n
}

func (t *RefTx) flushObjects() error {
	if len(t.objs) == 0 {
		return nil
	}
	st, err := t.s.insertPack(t.ctx, t.tx, t.objs, t.now)
	if err == nil && st.New == 0 {
		// Every object was already stored: drop the empty, unsealed pack.
		_, err = t.tx.ExecContext(t.ctx, `DELETE FROM packs WHERE id = (SELECT max(id) FROM packs) AND sealed = 0`)
	}
	return err
}

// Head returns a branch's head commit.
func (t *RefTx) Head(branch string) (object.ID, error) {
	return scanHead(stmt(t.ctx, t.tx, t.s.wstmts.head).QueryRowContext(t.ctx, branch), branch)
}

// scanHead reads the head a branch's row holds.
func scanHead(row *sql.Row, branch string) (object.ID, error) {
	var head []byte
	err := row.Scan(&head)
	if errors.Is(err, sql.ErrNoRows) {
		return object.Zero, fmt.Errorf("branch %q: %w", branch, ErrNotFound)
	}
	if err != nil {
		return object.Zero, err
	}
	id, err := object.FromBytes(head)
	if err != nil {
		return id, fmt.Errorf("branch %q: head: %w: %w", branch, ErrCorrupt, err)
	}
	return id, nil
}

// HeadForWrite returns a branch's head for a writer about to publish. It
// reads on the writer connection: a reader connection that finds the WAL
// grown since its last read drops its page cache and its mapping of the
// file (~0.1 ms), and a writer's previous commit always grew it; the
// writer connection wrote those pages itself. It waits while another of
// this Store's writers holds the connection, as publishing would (so never
// call it inside Update).
func (s *Store) HeadForWrite(branch string) (object.ID, error) {
	if s.w == nil {
		b, err := s.Branch(branch)
		return b.Head, err
	}
	return scanHead(s.wstmts.head.QueryRow(branch), branch)
}

// CreateBranch adds a branch pointing at head; start records the ref it was
// made from.
func (t *RefTx) CreateBranch(name string, head object.ID, start string) error {
	if err := checkNewBranchName(name); err != nil {
		return err
	}
	// As in git, "team" and "team/alice" cannot both be branches: a
	// mount's branches/ directory shows each as a path.
	var clash string
	err := t.tx.QueryRowContext(t.ctx, `SELECT name FROM branches WHERE substr(?, 1, length(name) + 1) = name || '/' OR substr(name, 1, length(?) + 1) = ? || '/' LIMIT 1`,
		name, name, name).Scan(&clash)
	if err == nil {
		return fmt.Errorf("branch %q: branch %q is in the way (one name cannot be a directory of the other): %w", name, clash, ErrExists)
	}
	if !isNoRows(err) {
		return fmt.Errorf("create branch %q: %w", name, err)
	}
	res, err := t.tx.ExecContext(t.ctx, `INSERT INTO branches(name, head, start, created, updated) VALUES(?, ?, ?, ?, ?) ON CONFLICT(name) DO NOTHING`,
		name, head[:], start, t.now, t.now)
	if err != nil {
		return fmt.Errorf("create branch %q: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("branch %q: %w", name, ErrExists)
	}
	if name == MainBranch {
		return t.appendLayer(head, object.Zero)
	}
	return nil
}

// SetHead moves a branch from old to head. It fails with ErrStale when the
// branch no longer points at old. Moving main appends a Layer.
func (t *RefTx) SetHead(branch string, old, head object.ID) error {
	res, err := stmt(t.ctx, t.tx, t.s.wstmts.setHead).ExecContext(t.ctx, head[:], t.now, branch, old[:])
	if err != nil {
		return fmt.Errorf("move branch %q: %w", branch, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		if _, err := t.Head(branch); err != nil {
			return err
		}
		return fmt.Errorf("move branch %q from %s: %w", branch, old.Short(), ErrStale)
	}
	if branch == MainBranch && head != old {
		return t.appendLayer(head, old)
	}
	return nil
}

func (t *RefTx) appendLayer(commit, base object.ID) error {
	var seq int64
	if err := stmt(t.ctx, t.tx, t.s.wstmts.nextLayer).QueryRowContext(t.ctx).Scan(&seq); err != nil {
		return err
	}
	l := &Layer{Seq: seq, Commit: commit, Base: base}
	id := t.Put(object.KindLayer, l.Encode())
	_, err := stmt(t.ctx, t.tx, t.s.wstmts.insertLayer).ExecContext(t.ctx, seq, id[:], commit[:], t.now)
	if err != nil {
		return fmt.Errorf("append layer %s: %w", l.Name(), err)
	}
	return nil
}

// DeleteBranch removes a branch record. Its commits stay. Unless force is
// set, a branch with Leases on it is refused.
func (t *RefTx) DeleteBranch(name string, force bool) error {
	if name == MainBranch {
		return fmt.Errorf("branch %q cannot be deleted: %w", name, ErrBadName)
	}
	if !force {
		if err := t.refuseLeased(name); err != nil {
			return err
		}
	}
	res, err := t.tx.ExecContext(t.ctx, `DELETE FROM branches WHERE name = ?`, name)
	if err != nil {
		return fmt.Errorf("delete branch %q: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("branch %q: %w", name, ErrNotFound)
	}
	return nil
}

// refuseLeased refuses a branch with Leases on it, naming up to five.
func (t *RefTx) refuseLeased(branch string) error {
	rows, err := t.tx.QueryContext(t.ctx, `SELECT id, holder FROM leases WHERE branch = ? ORDER BY id`, branch)
	if err != nil {
		return fmt.Errorf("leases on branch %q: %w", branch, err)
	}
	defer rows.Close()
	var held []string
	for rows.Next() {
		var id, holder string
		if err := rows.Scan(&id, &holder); err != nil {
			return err
		}
		if len(held) < 5 {
			held = append(held, fmt.Sprintf("%s (held by %s)", id, holder))
		} else if len(held) == 5 {
			held = append(held, "...")
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(held) == 0 {
		return nil
	}
	return fmt.Errorf("branch %q: Workspaces are leased on it: %s; end them first, or delete with force (their next commit will find no branch): %w",
		branch, strings.Join(held, ", "), ErrInUse)
}

// countStages credits each Stage with the objects the transaction wrote.
func (t *RefTx) countStages() {
	for _, sc := range t.stages {
		var b BatchStats
		for _, o := range sc.objs {
			if o.written {
				b.New++
				b.RawBytes += int64(len(o.raw))
				b.StoredBytes += int64(len(o.data))
			} else {
				b.Reused++
			}
		}
		sc.st.count(b)
	}
}
