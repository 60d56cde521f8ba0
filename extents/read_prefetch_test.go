package extents

import (
	"testing"

	"github.com/layerfs/layerfs/object"
)

// prefetchingStore records what a Reader tells it to prefetch.
type prefetchingStore struct {
	*MemStore
	asked map[object.ID]object.Kind
}

func (s *prefetchingStore) Prefetch(ids []object.ID, k object.Kind) {
	for _, id := range ids {
		s.asked[id] = k
	}
}

// TestReaderPrefetchesLeaves: reading a file whose tree has a level above
// the leaves tells the Getter about the leaves below each such node it
// loads, and about nothing else.
func TestReaderPrefetchesLeaves(t *testing.T) {
	s := NewTestStore(t)
	f := MustWrite(t, s, randBytes(7, 48<<20))
	ps := &prefetchingStore{MemStore: s, asked: map[object.ID]object.Kind{}}
	r := NewReader(ps, f)
	root, err := r.node(f.ID, anyLevel, f.Size)
	if err != nil {
		t.Fatal(err)
	}
	if root.Level < 2 {
		t.Fatalf("the test file's tree has %d levels above its leaves; want 2 or more", root.Level)
	}
	leaves := map[object.ID]bool{}
	var walk func(n *node)
	walk = func(n *node) {
		for _, e := range n.Entries {
			if n.Level == 1 {
				leaves[e.ID] = true
				continue
			}
			child, err := r.node(e.ID, n.Level-1, e.Len)
			if err != nil {
				t.Fatal(err)
			}
			walk(child)
		}
	}
	walk(root)
	clear(ps.asked) // walk loaded every node above the leaves; read again
	r = NewReader(ps, f)
	for _, err := range r.Extents(0, f.Size) {
		if err != nil {
			t.Fatal(err)
		}
	}
	for id, k := range ps.asked {
		if k != object.KindExtent || !leaves[id] {
			t.Errorf("prefetched %s, a %s, which is not a leaf", id.Short(), k)
		}
	}
	if len(ps.asked) != len(leaves) {
		t.Errorf("%d leaves prefetched of %d", len(ps.asked), len(leaves))
	}
}
