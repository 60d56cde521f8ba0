package extents

import (
	"fmt"

	"github.com/layerfs/layerfs/object"
)

// Walk calls fn once for each distinct object f is made of: its one chunk,
// or its root node and, depth first in file order, every node before the
// nodes and chunks it lists. It reads nodes but not chunks, checks that
// each node has the level and size its parent gives it, and stops at the
// first error, fn's included.
func Walk(s Getter, f File, fn func(id object.ID, k object.Kind) error) error {
	if f.Size < 0 {
		return fmt.Errorf("walk file of size %d: %w", f.Size, ErrInvalid)
	}
	if f.small() {
		return fn(f.ID, object.KindChunk)
	}
	w := walker{loader: loader{s: s}, fn: fn, seen: make(map[object.ID]struct{})}
	return w.node(f.ID, anyLevel, f.Size)
}

type walker struct {
	loader
	fn   func(object.ID, object.Kind) error
	seen map[object.ID]struct{}
}

// visit calls fn for id unless it was visited, and reports whether it was.
func (w *walker) visit(id object.ID, k object.Kind) (bool, error) {
	if _, ok := w.seen[id]; ok {
		return true, nil
	}
	w.seen[id] = struct{}{}
	return false, w.fn(id, k)
}

func (w *walker) node(id object.ID, level int, size int64) error {
	seen, err := w.visit(id, object.KindExtent)
	if err != nil {
		return err
	}
	n, err := w.loader.node(id, level, size)
	if err != nil || seen {
		return err
	}
	for _, e := range n.Entries {
		if n.Level > 0 {
			err = w.node(e.ID, n.Level-1, e.Len)
		} else {
			_, err = w.visit(e.ID, object.KindChunk)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
