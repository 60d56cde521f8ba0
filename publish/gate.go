package publish

import (
	"errors"
	"fmt"
	"sort"
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
	// Conflict: a touched path changed on the branch since the base;
	// nothing was written.
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
	// Head is the head the changes met: the new commit's parent, or the
	// head that made them UpToDate or Conflict.
	Head object.ID
	// Paths are the conflicting paths (Conflict).
	Paths []string
	// Objects counts what the publish stored and reused.
	Objects store.BatchStats
	// Timing of the phases.
	Prepare, Lock, Audit time.Duration
	// AuditErr is set when the Commit landed but its line ownership could
	// not be recorded: its lines read "unknown" in blame.
	AuditErr error
}

// Meta describes the Commit a publish makes.
type Meta struct {
	Origin  string // operation:<id> or workspace_session:<id>
	Message string
	Time    int64 // ns; zero means now
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
	if meta.Time == 0 {
		meta.Time = start.UnixNano()
	}
	if content == nil {
		content = s.NewStage()
	}
	g := &gate{s: s, branch: branch, cs: cs, trie: buildTrie(cs), meta: meta}
	b, err := s.Branch(branch)
	if err != nil {
		return nil, err
	}
	res, err := g.prepare(b.Head)
	if err != nil || res.Status != Committed {
		return res, err
	}
	if content.Bytes() > inlineMax {
		if err := content.Flush(); err != nil {
			return nil, err
		}
	}
	res.Prepare = time.Since(start)
	locked := time.Now()
	err = s.Update(func(tx *store.RefTx) error { return g.land(tx, content, res) })
	res.Lock = time.Since(locked)
	res.Objects = addStats(content.Stats(), g.trees.Stats())
	if errors.Is(err, errConflict) || (err == nil && res.Status != Committed) {
		return res, nil
	}
	if err != nil {
		return nil, fmt.Errorf("publish to %s: %w", branch, err)
	}
	audited := time.Now()
	res.AuditErr = g.audit(res)
	res.Audit = time.Since(audited)
	return res, nil
}

// audit records line ownership for a landed Commit; a failure leaves the
// Commit standing.
func (g *gate) audit(res *Result) error {
	parent, err := g.s.Commit(res.Head)
	if err != nil {
		return err
	}
	return recordBlame(g.s, parent.Tree, res.Commit, g.cs, g.meta.Origin)
}

// gate is one publish in progress.
type gate struct {
	s      *store.Store
	branch string
	cs     *Changeset
	trie   *changeNode
	meta   Meta
	trees  *store.Stage // new trees and the commit, rebuilt if head moves
}

// prepare checks cs against head and builds the commit that would land on
// it. A Conflict or UpToDate result is final.
func (g *gate) prepare(head object.ID) (*Result, error) {
	base := g.cs.Base
	if base.IsZero() {
		base = head
	}
	res := &Result{Head: head}
	if base != head {
		paths, err := g.conflicts(base, head)
		if err != nil {
			return nil, err
		}
		if len(paths) > 0 {
			res.Status, res.Paths = Conflict, paths
			return res, nil
		}
	}
	headCommit, err := g.s.Commit(head)
	if err != nil {
		return nil, err
	}
	g.trees = g.s.NewStage()
	a := &applier{s: g.s, stage: g.trees, now: g.meta.Time}
	root, err := a.apply(headCommit.Tree, g.trie)
	var nd *notDirError
	if errors.As(err, &nd) && base != head {
		res.Status, res.Paths = Conflict, []string{nd.path}
		return res, nil // head turned a needed directory into a file
	}
	if err != nil {
		return nil, err
	}
	if root == headCommit.Tree {
		res.Status = UpToDate
		return res, nil
	}
	c := &store.Commit{Tree: root, Parents: []object.ID{head}, Origin: g.meta.Origin, Message: g.meta.Message, Time: g.meta.Time}
	if res.Commit, err = g.trees.Put(object.KindCommit, c.Encode()); err != nil {
		return nil, err
	}
	res.Status = Committed
	return res, nil
}

// land runs inside the ref transaction: if head is still the one prepared
// against, write and move; otherwise redo the check and the rebuild here,
// under the lock, so this writer cannot starve.
func (g *gate) land(tx *store.RefTx, content *store.Stage, res *Result) error {
	cur, err := tx.Head(g.branch)
	if err != nil {
		return err
	}
	if cur != res.Head {
		redo, err := g.prepare(cur)
		if err != nil {
			return err
		}
		*res = *redo
		if res.Status != Committed {
			return errConflict // roll back: nothing to write
		}
	}
	tx.Write(content)
	tx.Write(g.trees)
	return tx.SetHead(g.branch, res.Head, res.Commit)
}

// conflicts lists the touched paths whose fingerprints differ between base
// and head.
func (g *gate) conflicts(base, head object.ID) ([]string, error) {
	bc, err := g.s.Commit(base)
	if err != nil {
		return nil, fmt.Errorf("base %s: %w", base.Short(), err)
	}
	hc, err := g.s.Commit(head)
	if err != nil {
		return nil, fmt.Errorf("head %s: %w", head.Short(), err)
	}
	if bc.Tree == hc.Tree {
		return nil, nil
	}
	var out []string
	for i := range g.cs.Changes {
		c := &g.cs.Changes[i]
		fb, err := fingerprint(g.s, bc.Tree, c.Path)
		if err != nil {
			return nil, err
		}
		fh, err := fingerprint(g.s, hc.Tree, c.Path)
		if err != nil {
			return nil, err
		}
		if fb == fh {
			continue
		}
		if metaOnly(c) && (!fh.Exists || fh.Type == store.TypeDir) {
			// A directory made or kept, with its own metadata: what lies
			// below it may change freely on both sides. Only head turning
			// it into something else conflicts.
			continue
		}
		out = append(out, c.Path)
	}
	sort.Strings(out)
	return out, nil
}

// metaOnly reports whether c changes only a directory's own metadata,
// keeping whatever it holds.
func metaOnly(c *Change) bool {
	return c.Entry != nil && c.Entry.Type == store.TypeDir && c.Entry.ID.IsZero() && !c.Opaque
}

// fingerprint of path p in tree root; a missing path (or one below a
// non-directory) has the zero Fingerprint.
func fingerprint(s *store.Store, root object.ID, p string) (Fingerprint, error) {
	e, err := s.Lookup(root, p)
	if errors.Is(err, store.ErrNotFound) {
		return Fingerprint{}, nil
	}
	if err != nil {
		return Fingerprint{}, err
	}
	return fingerprintOf(&e), nil
}

func addStats(a, b store.BatchStats) store.BatchStats {
	return store.BatchStats{New: a.New + b.New, Reused: a.Reused + b.Reused, RawBytes: a.RawBytes + b.RawBytes,
		StoredBytes: a.StoredBytes + b.StoredBytes, Packs: a.Packs + b.Packs}
}
