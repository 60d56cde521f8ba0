package extents

import (
	"fmt"
	"sync"

	"github.com/layerfs/layerfs/object"
)

// scratch is a Store that keeps what it is given in memory, over a Store
// it reads through: a run of edits builds into it, and keep then stores
// only the objects the last result names.
type scratch struct {
	s    Store
	mu   sync.Mutex
	objs map[object.ID]scratchObject
	kept map[object.ID]bool
}

type scratchObject struct {
	kind object.Kind
	data []byte
	base object.ID // PutChunk's hint
}

func newScratch(s Store) *scratch {
	return &scratch{s: s, objs: map[object.ID]scratchObject{}}
}

func (sc *scratch) PutChunk(data []byte, base object.ID) (object.ID, error) {
	return sc.put(object.KindChunk, data, base), nil
}

func (sc *scratch) PutNode(data []byte) (object.ID, error) {
	return sc.put(object.KindExtent, data, object.Zero), nil
}

func (sc *scratch) put(k object.Kind, data []byte, base object.ID) object.ID {
	id := object.Sum(k, data)
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if _, ok := sc.objs[id]; !ok {
		sc.objs[id] = scratchObject{kind: k, data: data, base: base}
	}
	return id
}

func (sc *scratch) lookup(id object.ID) (scratchObject, bool) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	o, ok := sc.objs[id]
	return o, ok
}

func (sc *scratch) Get(id object.ID, k object.Kind) ([]byte, error) {
	if o, ok := sc.lookup(id); ok {
		if o.kind != k {
			return nil, fmt.Errorf("%s %s is a %s: %w", k, id.Short(), o.kind, object.ErrCorrupt)
		}
		return o.data, nil
	}
	return sc.s.Get(id, k)
}

// keep stores in the underlying Store the objects of f that only the
// scratch holds: f's root and, below each node it holds, what that node
// names. Nodes it does not hold were already stored, with all below them.
func (sc *scratch) keep(f File) error {
	sc.kept = map[object.ID]bool{}
	if f.small() {
		return sc.keepObject(f.ID)
	}
	return sc.keepNode(f.ID)
}

func (sc *scratch) keepNode(id object.ID) error {
	o, ok := sc.lookup(id)
	if !ok || sc.kept[id] {
		return nil
	}
	n, err := DecodeNode(o.data)
	if err != nil {
		return err
	}
	for _, e := range n.Entries {
		if n.Level > 0 {
			err = sc.keepNode(e.ID)
		} else {
			err = sc.keepObject(e.ID)
		}
		if err != nil {
			return err
		}
	}
	return sc.keepObject(id)
}

// keepObject stores id if the scratch holds it. A chunk's base hint is
// followed through the scratch to a chunk the Store holds.
func (sc *scratch) keepObject(id object.ID) error {
	o, ok := sc.lookup(id)
	if !ok || sc.kept[id] {
		return nil
	}
	sc.kept[id] = true
	var err error
	if o.kind == object.KindExtent {
		_, err = sc.s.PutNode(o.data)
		return err
	}
	base := o.base
	for i := 0; i < 64; i++ {
		b, ok := sc.lookup(base)
		if !ok {
			break
		}
		base = b.base
	}
	if _, ok := sc.lookup(base); ok {
		base = object.Zero
	}
	_, err = sc.s.PutChunk(o.data, base)
	return err
}
