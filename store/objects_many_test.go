package store

import (
	"bytes"
	"errors"
	"testing"

	"github.com/layerfs/layerfs/object"
)

func TestGetManyReadsLikeGet(t *testing.T) {
	s := NewTestStore(t)
	want := map[object.ID][]byte{}
	b := s.NewBatch()
	var ids []object.ID
	for i := 0; i < GetManyMax+10; i++ { // more than one query's worth
		data := randBytes(int64(i), 100+i*50)
		if i%3 == 0 {
			data = bytes.Repeat([]byte{byte(i)}, 5000) // compressed
		}
		id, err := b.Put(object.KindChunk, data)
		if err != nil {
			t.Fatal(err)
		}
		want[id] = data
		ids = append(ids, id)
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	v2 := append([]byte(nil), want[ids[1]]...)
	copy(v2[10:], "edit")
	delta := putDelta(t, s, v2, ids[1])
	want[delta] = v2
	missing := object.Sum(object.KindChunk, []byte("never stored"))
	tree := putFlush(t, s, object.KindTree, []byte{0})

	ask := append(append([]object.ID{}, ids...), delta, missing, tree, ids[0]) // ids[0] twice
	got := map[object.ID][]byte{}
	errs := map[object.ID]error{}
	calls := 0
	err := s.GetMany(ask, object.KindChunk, func(id object.ID, data []byte, err error) {
		calls++
		got[id], errs[id] = data, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls != len(ask)-1 {
		t.Errorf("%d calls for %d distinct ids", calls, len(ask)-1)
	}
	for id, data := range want {
		if errs[id] != nil || !bytes.Equal(got[id], data) {
			t.Errorf("object %s: %v", id.Short(), errs[id])
		}
	}
	if !errors.Is(errs[missing], ErrNotFound) {
		t.Errorf("missing object: %v", errs[missing])
	}
	if !errors.Is(errs[tree], ErrCorrupt) {
		t.Errorf("object of another kind: %v", errs[tree])
	}
}

func putDelta(t *testing.T, s *Store, data []byte, base object.ID) object.ID {
	t.Helper()
	b := s.NewBatch()
	id, err := b.PutChunk(data, base)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	var enc int
	s.r.QueryRow(`SELECT enc FROM objects WHERE id = ?`, id[:]).Scan(&enc)
	if enc != encDelta {
		t.Fatalf("the edited chunk was stored with enc %d, not as a delta", enc)
	}
	return id
}
