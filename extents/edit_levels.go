package extents

import (
	"fmt"

	"github.com/layerfs/layerfs/object"
)

// spliceLevels carries a splice of the leaf entries up the tree and returns
// the new root. Each level re-cuts nodes from the old node boundary before
// the change until a new boundary meets an old one after it, and passes the
// new nodes up as the splice of the level above. It stops at the first level
// left with one node; past the old root it builds the new levels whole.
func spliceLevels(s Store, r *Reader, sp entrySplice) (object.ID, error) {
	if r.f.small() {
		return buildTree(s, 0, sp.entries)
	}
	root, err := r.node(r.f.ID, anyLevel, r.f.Size)
	if err != nil {
		return object.Zero, err
	}
	for level := 0; level <= root.Level; level++ {
		if sp, err = spliceLevel(s, r, level, sp); err != nil {
			return object.Zero, fmt.Errorf("level %d: %w", level, err)
		}
		id, ok, err := singleNode(r, level, sp)
		if err != nil || ok {
			return id, err
		}
	}
	return buildTree(s, root.Level+1, sp.entries)
}

// spliceLevel applies sp to the entries of level and returns the splice it
// makes of the level above: the old nodes it replaces and the new ones.
func spliceLevel(s Store, r *Reader, level int, sp entrySplice) (entrySplice, error) {
	cur := newCursor(r, level)
	if err := cur.seek(sp.start); err != nil {
		return entrySplice{}, err
	}
	_, start, _ := cur.nodeSpan()
	b := levelBuilder{s: s, level: level}
	t := cur.top()
	if err := addAll(&b, t.n.Entries[:t.i]); err != nil {
		return entrySplice{}, err
	}
	if err := addAll(&b, sp.entries); err != nil {
		return entrySplice{}, err
	}
	if err := cur.seek(sp.oldEnd); err != nil {
		return entrySplice{}, err
	}
	if err := resync(&b, cur); err != nil {
		return entrySplice{}, err
	}
	return entrySplice{start: start, oldEnd: cur.offset(), entries: b.out}, nil
}

// resync feeds old entries from cur to b until a node b ends is also where
// an old node ended, or the level ends.
func resync(b *levelBuilder, cur *cursor) error {
	for len(b.pending) > 0 || !cur.atNodeStart() {
		if cur.done {
			return b.flush()
		}
		e, _ := cur.entry()
		if _, err := b.add(e); err != nil {
			return err
		}
		if err := cur.next(); err != nil {
			return err
		}
	}
	return nil
}

func addAll(b *levelBuilder, entries []Entry) error {
	for _, e := range entries {
		if _, err := b.add(e); err != nil {
			return err
		}
	}
	return nil
}

// singleNode reports whether level, after sp made the nodes over
// [sp.start, sp.oldEnd) of the old file into sp.entries, has one node left,
// and returns that node, the new root.
func singleNode(r *Reader, level int, sp entrySplice) (object.ID, bool, error) {
	size := r.f.Size
	switch {
	case len(sp.entries) > 1:
		return object.Zero, false, nil
	case len(sp.entries) == 1:
		return sp.entries[0].ID, sp.start == 0 && sp.oldEnd == size, nil
	case sp.start > 0 && sp.oldEnd == size:
		id, start, _, err := nodeAt(r, level, sp.start-1)
		return id, start == 0, err
	case sp.start == 0 && sp.oldEnd < size:
		id, start, n, err := nodeAt(r, level, sp.oldEnd)
		return id, start+n == size, err
	}
	return object.Zero, false, fmt.Errorf("splice leaves level %d empty: %w", level, ErrInvalid)
}

// nodeAt returns the ID, offset and size of the old node at level holding
// offset x.
func nodeAt(r *Reader, level int, x int64) (object.ID, int64, int64, error) {
	cur := newCursor(r, level)
	if err := cur.seek(x); err != nil {
		return object.Zero, 0, 0, err
	}
	id, start, n := cur.nodeSpan()
	return id, start, n, nil
}
