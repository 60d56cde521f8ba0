package extents

import (
	"fmt"

	"github.com/layerfs/layerfs/object"
)

// levelBuilder groups the entries of one level into nodes by the endsNode
// rule, stores each node, and collects the entries for the level above.
type levelBuilder struct {
	s       Store
	level   int
	pending []Entry // entries of the node being built
	out     []Entry // one per stored node
}

// add appends e to the current node and reports whether that ended it.
func (b *levelBuilder) add(e Entry) (bool, error) {
	if b.pending == nil {
		b.pending = make([]Entry, 0, 4<<FanoutBits)
	}
	b.pending = append(b.pending, e)
	if !endsNode(len(b.pending), e.ID) {
		return false, nil
	}
	return true, b.flush()
}

// flush stores the current node, if it has any entries.
func (b *levelBuilder) flush() error {
	if len(b.pending) == 0 {
		return nil
	}
	n := Node{Level: b.level, Entries: b.pending}
	id, err := b.s.PutNode(n.Encode())
	if err != nil {
		return fmt.Errorf("put extent node: %w", err)
	}
	b.out = append(b.out, Entry{Len: n.Size(), ID: id})
	b.pending = b.pending[:0]
	return nil
}

// buildTree stores the nodes over entries, a whole level, and the levels
// above it until one node is left, and returns that root.
func buildTree(s Store, level int, entries []Entry) (object.ID, error) {
	for ; level <= MaxLevel; level++ {
		if len(entries) == 0 {
			return object.Zero, fmt.Errorf("build level %d: no entries: %w", level, ErrInvalid)
		}
		b := levelBuilder{s: s, level: level}
		for _, e := range entries {
			if _, err := b.add(e); err != nil {
				return object.Zero, err
			}
		}
		if err := b.flush(); err != nil {
			return object.Zero, err
		}
		if len(b.out) == 1 {
			return b.out[0].ID, nil
		}
		entries = b.out
	}
	return object.Zero, fmt.Errorf("build tree: more than %d levels: %w", MaxLevel, ErrInvalid)
}
