package publish

import (
	"fmt"

	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// MergeBranches folds branch from into branch into: a fast-forward when
// into's head is an ancestor of from's, nothing when from's head is
// already in into's history, and otherwise a three-way merge through the
// gate against their nearest common ancestor, with into's .lww rules. The
// merge Commit has both heads as parents, and merged lines keep the owners
// they have on their branch.
func MergeBranches(s *store.Store, into, from string, meta Meta) (*Result, error) {
	a, err := s.Branch(into)
	if err != nil {
		return nil, err
	}
	b, err := s.Branch(from)
	if err != nil {
		return nil, err
	}
	rel, base := relate(s, a.Head, b.Head)
	switch rel {
	case behind:
		return &Result{Status: UpToDate, Head: a.Head}, nil
	case ahead:
		return fastForward(s, into, a.Head, b.Head)
	case unrelated:
		return nil, fmt.Errorf("merge %s into %s: %s and %s share no history", from, into, a.Head.Short(), b.Head.Short())
	}
	cs, err := changesetBetween(s, base, b.Head)
	if err != nil {
		return nil, err
	}
	meta.Parents, meta.Carry = []object.ID{b.Head}, true
	if meta.Message == "" {
		meta.Message = fmt.Sprintf("merge %s into %s", from, into)
	}
	return Publish(s, into, cs, nil, meta)
}

// fastForward moves into from old to head, which holds old in its history.
func fastForward(s *store.Store, into string, old, head object.ID) (*Result, error) {
	err := s.Update(func(tx *store.RefTx) error { return tx.SetHead(into, old, head) })
	if err != nil {
		return nil, fmt.Errorf("fast-forward %s: %w", into, err)
	}
	return &Result{Status: Committed, Commit: head, Head: old, FastForward: true}, nil
}

// changesetBetween turns what changed from commit base to commit tip into
// a Changeset against base.
func changesetBetween(s *store.Store, base, tip object.ID) (*Changeset, error) {
	bc, err := s.Commit(base)
	if err != nil {
		return nil, err
	}
	tc, err := s.Commit(tip)
	if err != nil {
		return nil, err
	}
	diffs, err := DiffTrees(s, bc.Tree, tc.Tree)
	if err != nil {
		return nil, err
	}
	cs := &Changeset{Base: base}
	for _, d := range diffs {
		cs.Changes = append(cs.Changes, changeOf(d))
	}
	return cs, nil
}

// changeOf turns one tree difference into a change. Directories carry only
// their own metadata (their contents come as changes of their own), and a
// directory that replaced a file or symlink starts empty.
func changeOf(d PathDiff) Change {
	if d.New == nil {
		return Change{Path: d.Path}
	}
	e := *d.New
	c := Change{Path: d.Path, Entry: &e}
	if e.Type == store.TypeDir {
		e.ID = object.Zero
		c.Opaque = d.Kind == TypeChanged
	}
	return c
}

// relation is how the histories of two commits a and b meet.
type relation int

const (
	diverged  relation = iota // neither holds the other: merge from their base
	behind                    // b is a or in a's history: nothing to merge
	ahead                     // a is in b's history: a fast-forward
	unrelated                 // no common ancestor
)

// relate works out how a and b relate and, when they diverged, their
// nearest common ancestor (the first one met walking back from b). It
// walks a's history once, then b's only as far as a's: nothing behind a
// commit of a's history can lead back to a.
func relate(s *store.Store, a, b object.ID) (relation, object.ID) {
	ofA := map[object.ID]bool{}
	walkHistory(s, a, func(id object.ID) step { ofA[id] = true; return walkOn })
	if ofA[b] {
		return behind, object.ID{}
	}
	rel, base := unrelated, object.ID{}
	walkHistory(s, b, func(id object.ID) step {
		switch {
		case id == a:
			rel = ahead
			return walkStop
		case ofA[id]:
			if rel == unrelated {
				rel, base = diverged, id
			}
			return walkPast
		}
		return walkOn
	})
	if rel == ahead {
		return ahead, object.ID{}
	}
	return rel, base
}

// step tells walkHistory how to go on from a commit.
type step int

const (
	walkOn   step = iota // on to its parents
	walkPast             // not to its parents, but on with the others
	walkStop             // no further
)

// walkHistory visits id and its ancestors breadth-first, nearest first,
// as fn's steps say.
func walkHistory(s *store.Store, id object.ID, fn func(object.ID) step) {
	seen := map[object.ID]bool{id: true}
	queue := []object.ID{id}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		switch fn(cur) {
		case walkStop:
			return
		case walkPast:
			continue
		}
		c, err := s.Commit(cur)
		if err != nil {
			continue
		}
		for _, p := range c.Parents {
			if !seen[p] {
				seen[p] = true
				queue = append(queue, p)
			}
		}
	}
}
