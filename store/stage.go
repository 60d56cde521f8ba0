package store

import (
	"sync"

	"github.com/layerfs/layerfs/object"
)

// Stage holds new objects in memory — hashed and compressed — until they
// are written, either inside the ref transaction that publishes them
// (RefTx.Write: one transaction for a small commit) or as packs of their
// own (Flush) when there are too many to hold the write lock for. A Stage
// implements extents.Store, so file edits can build into it.
type Stage struct {
	s     *Store
	mu    sync.Mutex
	objs  map[object.ID]*pendingObject
	order []*pendingObject
	bytes int
	stats BatchStats
}

// stageSpill is how many stored bytes a Stage holds in memory before it
// writes them as packs of their own: a capture of big files must not hold
// them all in memory. Objects spilled for a publish that then conflicts
// stay in the Store, where a retry finds them.
const stageSpill = 64 << 20

// NewStage starts an empty Stage.
func (s *Store) NewStage() *Stage {
	return &Stage{s: s, objs: map[object.ID]*pendingObject{}}
}

// Put stages an object of kind k and returns its ID. An object the Store
// already holds is not staged again.
func (st *Stage) Put(k object.Kind, raw []byte) (object.ID, error) {
	return st.put(k, raw, object.Zero)
}

// PutChunk stages file bytes; base, when set, may become their delta base.
func (st *Stage) PutChunk(raw []byte, base object.ID) (object.ID, error) {
	return st.put(object.KindChunk, raw, base)
}

// PutNode stages an extent node.
func (st *Stage) PutNode(raw []byte) (object.ID, error) {
	return st.put(object.KindExtent, raw, object.Zero)
}

func (st *Stage) put(k object.Kind, raw []byte, base object.ID) (object.ID, error) {
	id := object.Sum(k, raw)
	st.mu.Lock()
	_, staged := st.objs[id]
	st.mu.Unlock()
	if staged {
		return id, nil
	}
	if ok, err := st.s.Has(id); err != nil || ok {
		if ok {
			st.mu.Lock()
			st.stats.Reused++
			st.mu.Unlock()
		}
		return id, err
	}
	o := st.s.encode(id, k, raw, base, st.lookupPending)
	st.mu.Lock()
	if _, dup := st.objs[id]; !dup {
		st.objs[id] = o
		st.order = append(st.order, o)
		st.bytes += len(o.data)
	}
	spill := st.bytes >= stageSpill
	st.mu.Unlock()
	if spill {
		return id, st.Flush()
	}
	return id, nil
}

func (st *Stage) lookupPending(id object.ID) (*pendingObject, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	o, ok := st.objs[id]
	return o, ok
}

// Get returns an object's bytes, staged or stored.
func (st *Stage) Get(id object.ID, k object.Kind) ([]byte, error) {
	if o, ok := st.lookupPending(id); ok {
		if o.kind != k {
			return nil, wrongKind(id, o.kind, k)
		}
		return o.raw, nil
	}
	return st.s.Get(id, k)
}

// Bytes is how many stored bytes the Stage holds.
func (st *Stage) Bytes() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.bytes
}

// Stats says what was written and reused so far.
func (st *Stage) Stats() BatchStats {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.stats
}

// take empties the Stage and returns what it held, in order.
func (st *Stage) take() []*pendingObject {
	st.mu.Lock()
	defer st.mu.Unlock()
	objs := st.order
	st.order, st.objs, st.bytes = nil, map[object.ID]*pendingObject{}, 0
	return objs
}

func (st *Stage) count(b BatchStats) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.stats.New += b.New
	st.stats.Reused += b.Reused
	st.stats.RawBytes += b.RawBytes
	st.stats.StoredBytes += b.StoredBytes
	st.stats.Packs += b.Packs
}

// Flush writes the staged objects as packs of their own, each in a short
// transaction, and empties the Stage.
func (st *Stage) Flush() error {
	objs := st.take()
	for len(objs) > 0 {
		n, size := 0, 0
		for n < len(objs) && size < packTarget {
			size += len(objs[n].data)
			n++
		}
		b, err := st.s.writePack(objs[:n])
		st.count(b)
		if err != nil {
			return err
		}
		objs = objs[n:]
	}
	return nil
}

// Write adds the staged objects to the transaction's pack and empties the
// Stage: they land atomically with the refs the transaction moves.
func (t *RefTx) Write(st *Stage) {
	objs := st.take()
	t.objs = append(t.objs, objs...)
	t.stages = append(t.stages, stageCount{st, objs})
}

type stageCount struct {
	st   *Stage
	objs []*pendingObject
}
