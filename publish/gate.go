package publish

import (
	"errors"
	"fmt"
	"time"

	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// Status is how a publish ended.
type Status int

const (
	// Committed: a new Commit is the branch head.
	Committed Status = iota + 1
	// UpToDate: the result equals head's tree; no Commit was made.
	UpToDate
	// Conflict: a path changed on both sides in a way the gate cannot
	// merge; nothing was written.
	Conflict
)

func (s Status) String() string {
	switch s {
	case Committed:
		return "committed"
	case UpToDate:
		return "up-to-date"
	case Conflict:
		return "conflict"
	}
	return fmt.Sprintf("status(%d)", int(s))
}

// Result says what a publish did.
type Result struct {
	Status Status
	// Commit is the new head (Committed).
	Commit object.ID
	// FastForward: a branch merge moved the branch to the other's head,
	// which already held it; no new Commit was made.
	FastForward bool
	// Head is the head the changes met: the new commit's parent, or the
	// head that made them UpToDate or Conflict.
	Head object.ID
	// Paths are the conflicting paths (Conflict), sorted.
	Paths []string
	// Conflicts says, per conflicting path, why and — for overlapping text
	// edits — how the merge went, so a Workspace can write markers.
	Conflicts []PathConflict
	// Merged lists the paths both sides changed whose edits merged line by
	// line (the merged content landed, or would have without a conflict
	// elsewhere).
	Merged []MergedPath
	// LWW lists the .lww decisions: which side won each path.
	LWW []store.LWWDecision
	// Objects counts what the publish stored and reused.
	Objects store.BatchStats
	// Timing of the phases.
	Prepare, Lock, Audit time.Duration
	// AuditErr is set when the Commit landed but its line ownership could
	// not be recorded: its lines read "unknown" in blame.
	AuditErr error

	audit func() error // deferred (Meta.DeferAudit), until FinishAudit
}

// FinishAudit runs the audit Publish deferred (Meta.DeferAudit), if any,
// and records its time in Audit and its failure in AuditErr.
func (r *Result) FinishAudit() {
	if r.audit == nil {
		return
	}
	start := time.Now()
	r.AuditErr = r.audit()
	r.Audit = time.Since(start)
	r.audit = nil
}

// Meta describes the Commit a publish makes.
type Meta struct {
	Origin  string // operation:<id> or workspace_session:<id>
	Message string
	Time    int64 // ns; zero means now
	// Parents beyond head: the merged branch's head, for a branch merge.
	Parents []object.ID
	// Carry keeps the line owners the changed content already has (a
	// branch merge brings its lines' authors along) instead of crediting
	// the changed lines to Origin.
	Carry bool
	// Force lands files that still hold conflict markers.
	Force bool
	// DeferAudit leaves the landed Commit's audit (line ownership for
	// blame) to the caller, who runs Result.FinishAudit — beside other
	// work, such as a Workspace's remount — before it reports the Commit.
	DeferAudit bool
	// Landing, when set, runs in the transaction that lands the Commit,
	// after the branch moved to it — for what must land with it, such as
	// a Workspace's lease on it. An error rolls the whole landing back.
	Landing func(tx *store.RefTx, commit object.ID) error
}

// inlineMax is how many staged bytes may ride in the ref transaction; more
// are flushed as packs of their own first, so the lock stays short.
const inlineMax = 1 << 20

// errConflict aborts the ref transaction when the slow path finds a conflict.
var errConflict = errors.New("conflict")

// Publish lands cs on branch through the gate. content holds the new
// objects the changes name (file chunks and extent nodes), staged and not
// yet written; it may be nil. A Conflict is a Result, not an error; errors
// are for bad input and failures, and leave the branch as it was.
func Publish(s *store.Store, branch string, cs *Changeset, content *store.Stage, meta Meta) (*Result, error) {
	start := time.Now()
	if err := cs.Check(); err != nil {
		return nil, err
	}
	if err := store.CheckOrigin(meta.Origin); err != nil {
		return nil, err
	}
	if meta.Time == 0 {
		meta.Time = start.UnixNano()
	}
	if content == nil {
		content = s.NewStage()
	}
	content.ReadThroughWriter(false) // the transaction may read it (store.Stage.ReadThroughWriter)
	g := &gate{s: s, branch: branch, cs: cs, meta: meta, content: content}
	head, err := s.HeadForWrite(branch)
	if err != nil {
		return nil, err
	}
	res, err := g.prepare(head)
	if err != nil || res.Status != Committed {
		return res, err
	}
	if content.Bytes() > inlineMax {
		if err := content.Flush(); err != nil {
			return nil, err
		}
	}
	if !meta.DeferAudit {
		g.blame(res) // lands with the Commit
	}
	res.Prepare = time.Since(start)
	locked := time.Now()
	err = s.Update(func(tx *store.RefTx) error { return g.land(tx, res) })
	res.Lock = time.Since(locked)
	res.Objects = addStats(content.Stats(), g.trees.Stats())
	if errors.Is(err, errConflict) || (err == nil && res.Status != Committed) {
		return res, nil
	}
	if err != nil {
		return nil, fmt.Errorf("publish to %s: %w", branch, err)
	}
	g.cacheCommit(res)
	if g.rows == nil || g.rows.err != nil {
		// Head moved before the lock, ownership could not be worked out
		// before it, or the caller defers it: it is recorded against the
		// head the Commit landed on, in a transaction of its own.
		res.audit = func() error { return g.audit(res) }
		if !meta.DeferAudit {
			res.FinishAudit()
		}
	}
	return res, nil
}

// Preview runs the gate for cs on head as Publish would, and lands
// nothing: the Result says what Publish would have found — the paths
// merged and their merged content, the .lww decisions, the conflicts
// (Status Conflict) — for a Workspace that moves its pending changes
// onto head without committing them. Files holding markers are not
// refused. content holds cs's new content, as for Publish; objects it
// spilled stay in the Store, as for a publish that conflicts.
func Preview(s *store.Store, cs *Changeset, content *store.Stage, head object.ID) (*Result, error) {
	if err := cs.Check(); err != nil {
		return nil, err
	}
	if content == nil {
		content = s.NewStage()
	}
	g := &gate{s: s, cs: cs, meta: Meta{Time: time.Now().UnixNano(), Force: true}, content: content}
	return g.prepare(head)
}

// gate is one publish in progress.
type gate struct {
	s       *store.Store
	branch  string
	cs      *Changeset
	meta    Meta
	content *store.Stage // the caller's new file content
	trees   *store.Stage // merged content, new trees and the commit: rebuilt if head moves
	merges  map[string]*mergeInfo
	commit  *store.Commit // the commit trees holds
	// rows is the line ownership computed before the lock against the
	// prepared head, landed with the Commit; nil when it must be
	// recorded afterwards.
	rows *blameRows
}

// blameRows is line ownership ready to land, or why it could not be
// computed.
type blameRows struct {
	rows []store.BlameRow
	err  error
}

// prepare checks cs against head, merges what both sides changed, and
// builds the commit that would land on head. A Conflict or UpToDate result
// is final.
func (g *gate) prepare(head object.ID) (*Result, error) {
	base := g.cs.Base
	if base.IsZero() {
		base = head
	}
	res := &Result{Head: head}
	g.trees = g.s.NewStage()
	g.merges = nil
	changes := g.cs.Changes
	if base != head {
		r, err := g.reconcile(base, head)
		if err != nil {
			return nil, err
		}
		res.Merged, res.LWW, res.Conflicts = r.merged, r.lww, r.conflicts
		if len(r.conflicts) > 0 {
			res.Status, res.Paths = Conflict, conflictPaths(r.conflicts)
			return res, nil
		}
		changes, g.merges = r.changes, r.merges
	}
	if !g.meta.Force {
		if err := g.checkMarkers(changes); err != nil {
			return nil, err
		}
	}
	return g.build(res, head, base, changes)
}

// build applies changes to head's tree and stages the commit.
func (g *gate) build(res *Result, head, base object.ID, changes []Change) (*Result, error) {
	headCommit, err := g.s.Commit(head)
	if err != nil {
		return nil, err
	}
	a := &applier{s: g.s, stage: g.trees, now: g.meta.Time}
	root, err := a.apply(headCommit.Tree, buildTrie(changes))
	var nd *notDirError
	if errors.As(err, &nd) && base != head {
		res.Status, res.Paths = Conflict, []string{nd.path}
		res.Conflicts = []PathConflict{{Path: nd.path, Kind: ConflictType}}
		return res, nil // head turned a needed directory into a file
	}
	if err != nil {
		return nil, err
	}
	if root == headCommit.Tree && len(g.meta.Parents) == 0 {
		res.Status = UpToDate
		return res, nil
	}
	c := &store.Commit{Tree: root, Parents: append([]object.ID{head}, g.meta.Parents...),
		Origin: g.meta.Origin, Message: g.meta.Message, Time: g.meta.Time}
	if res.Commit, err = g.trees.Put(object.KindCommit, c.Encode()); err != nil {
		return nil, err
	}
	g.commit = c
	res.Status = Committed
	return res, nil
}

// land runs inside the ref transaction: if head is still the one prepared
// against, write and move; otherwise redo the merge and the rebuild here,
// under the lock, so this writer cannot starve. The branch is moved first:
// the move itself checks head (ErrStale), which spares reading it in the
// common case; the objects it names land in the same transaction.
func (g *gate) land(tx *store.RefTx, res *Result) error {
	err := tx.SetHead(g.branch, res.Head, res.Commit)
	if errors.Is(err, store.ErrStale) {
		err = g.rebase(tx, res)
	}
	if err != nil {
		return err
	}
	if g.meta.Landing != nil {
		if err := g.meta.Landing(tx, res.Commit); err != nil {
			return err
		}
	}
	tx.Write(g.content)
	tx.Write(g.trees)
	if len(res.LWW) > 0 {
		if err := tx.RecordLWW(res.Commit, res.LWW); err != nil {
			return err
		}
	}
	if g.rows != nil && g.rows.err == nil {
		res.AuditErr = tx.AppendBlame(g.rows.rows)
	}
	return nil
}

// rebase redoes the publish on the head another writer moved the branch
// to, under the lock, and moves the branch there.
func (g *gate) rebase(tx *store.RefTx, res *Result) error {
	cur, err := tx.Head(g.branch)
	if err != nil {
		return err
	}
	prev, rows := res.Head, g.rows
	g.rows = nil // computed against a head that is gone
	redo, err := g.prepare(cur)
	if err != nil {
		return err
	}
	*res = *redo
	if res.Status != Committed {
		return errConflict // roll back: nothing to write
	}
	g.rows = g.stillValid(rows, prev, cur, res.Commit)
	return tx.SetHead(g.branch, res.Head, res.Commit)
}

// blame computes line ownership for the prepared Commit before the lock,
// reading the new content from the stages, so it lands with the Commit.
func (g *gate) blame(res *Result) {
	start := time.Now()
	defer func() { res.Audit = time.Since(start) }()
	parent, err := g.s.Commit(res.Head)
	if err != nil {
		return // recorded after landing, the slow way
	}
	b := &blamer{s: g.s, get: stages{g.content, g.trees}, rd: g.s.WriterReads(), parent: parent.Tree, head: res.Head, commit: res.Commit,
		origin: g.meta.Origin, carry: g.meta.Carry, merges: g.merges}
	rows, err := b.rowsFor(g.cs)
	g.rows = &blameRows{rows: rows, err: err}
}

// name makes the rows the ownership of commit.
func (r *blameRows) name(commit object.ID) {
	for i := range r.rows {
		r.rows[i].Commit = commit
	}
}

// stillValid returns ownership rows worked out against head prev for the
// Commit now landing on head cur, when they still hold: nothing merged,
// only files written or deleted, and each of those paths as prev had it.
// The rows then name the new Commit. Otherwise nil: they are worked out
// again after landing.
func (g *gate) stillValid(rows *blameRows, prev, cur, commit object.ID) *blameRows {
	if rows == nil || rows.err != nil || len(g.merges) > 0 {
		return nil
	}
	a, err := g.s.Commit(prev)
	if err != nil {
		return nil
	}
	b, err := g.s.Commit(cur)
	if err != nil {
		return nil
	}
	for i := range g.cs.Changes {
		c := &g.cs.Changes[i]
		if c.From != "" || (c.Entry != nil && c.Entry.Type != store.TypeFile) {
			return nil
		}
		ea, err := LookupEntry(g.s, a.Tree, c.Path)
		if err != nil {
			return nil
		}
		eb, err := LookupEntry(g.s, b.Tree, c.Path)
		if err != nil || (ea == nil) != (eb == nil) || (ea != nil && (ea.Type != eb.Type || ea.ID != eb.ID)) {
			return nil
		}
	}
	rows.name(commit)
	return rows
}

// cacheCommit remembers the landed commit: the next call reads it as its
// base.
func (g *gate) cacheCommit(res *Result) {
	if g.commit != nil {
		g.s.CacheCommit(res.Commit, g.commit)
	}
}

// audit records line ownership for a landed Commit; a failure leaves the
// Commit standing.
func (g *gate) audit(res *Result) error {
	parent, err := g.s.Commit(res.Head)
	if err != nil {
		return err
	}
	b := &blamer{s: g.s, get: g.s, rd: g.s, parent: parent.Tree, head: res.Head, commit: res.Commit, origin: g.meta.Origin,
		carry: g.meta.Carry, merges: g.merges}
	return b.record(g.cs)
}

// fingerprint of path p in tree root; a missing path (or one below a
// non-directory) has the zero Fingerprint.
func fingerprint(s *store.Store, root object.ID, p string) (Fingerprint, error) {
	e, err := LookupEntry(s, root, p)
	if err != nil || e == nil {
		return Fingerprint{}, err
	}
	return fingerprintOf(e), nil
}

// LookupEntry finds p below root; nil when it is missing.
func LookupEntry(s *store.Store, root object.ID, p string) (*store.Entry, error) {
	e, err := s.Lookup(root, p)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &e, nil
}

// metaOnly reports whether c changes only a directory's own metadata,
// keeping whatever it holds.
func metaOnly(c *Change) bool {
	return c.Entry != nil && c.Entry.Type == store.TypeDir && c.Entry.ID.IsZero() && !c.Opaque
}

func addStats(a, b store.BatchStats) store.BatchStats {
	return store.BatchStats{New: a.New + b.New, Reused: a.Reused + b.Reused, RawBytes: a.RawBytes + b.RawBytes,
		StoredBytes: a.StoredBytes + b.StoredBytes, Packs: a.Packs + b.Packs}
}

// stages reads objects from the first Stage that holds them, or else from
// the Store.
type stages []*store.Stage

func (ss stages) Get(id object.ID, k object.Kind) ([]byte, error) {
	for _, st := range ss {
		if data, ok, err := st.Staged(id, k); ok {
			return data, err
		}
	}
	return ss[0].Get(id, k)
}
