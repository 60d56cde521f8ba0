package store

import (
	"bytes"
	"testing"

	"github.com/layerfs/layerfs/object"
)

// TestExtentCache: extent nodes a commit wrote are kept in memory, and
// Get hands out copies of them: what a caller does with one never
// reaches the next.
func TestExtentCache(t *testing.T) {
	s := NewTestStore(t)
	node := bytes.Repeat([]byte("node "), 400)
	st := s.NewStage()
	id, err := st.PutNode(bytes.Clone(node))
	if err != nil {
		t.Fatal(err)
	}
	chunk, err := st.Put(object.KindChunk, []byte("chunk"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(func(tx *RefTx) error { tx.Write(st); return nil }); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.extents.get(id); !ok {
		t.Fatal("the extent node the commit wrote is not cached")
	}
	if _, ok := s.extents.get(chunk); ok {
		t.Error("a chunk is cached as an extent node")
	}
	for i := range 2 {
		got, err := s.Get(id, object.KindExtent)
		if err != nil || !bytes.Equal(got, node) {
			t.Fatalf("get %d: %d bytes, %v", i, len(got), err)
		}
		got[0] ^= 0xff // the caller's copy
	}
	if _, err := s.Get(id, object.KindChunk); err == nil {
		t.Error("an extent node read as a chunk")
	}
}
