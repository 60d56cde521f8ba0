package lowerfs

import (
	"fmt"
	"unsafe"

	"github.com/layerfs/layerfs/extents"
	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// Store is where a View reads objects. *store.Store implements it; tests
// may wrap one to inject failures.
type Store interface {
	// Get returns the verified canonical bytes of object id, of kind k.
	Get(id object.ID, k object.Kind) ([]byte, error)
}

// BatchStore is a Store that reads several objects in one call, which
// read-ahead uses when the Store offers it: one query for a run of chunks
// costs far less than one query each. *store.Store implements it.
type BatchStore interface {
	GetMany(ids []object.ID, k object.Kind, fn func(id object.ID, data []byte, err error)) error
}

// IntoStore is a BatchStore that reads into buffers its caller recycles
// (see chunk); read-ahead uses it for chunks when the Store offers it.
// *store.Store implements it.
type IntoStore interface {
	GetManyInto(ids []object.ID, k object.Kind, alloc func(n int) []byte, fn func(id object.ID, data []byte, err error)) error
}

// CommitStore is a Store that keeps the Commits it decoded, which Open
// uses when the Store offers it: the Commit a Workspace follows is the one
// this process just landed, and its kept copy costs no query (~0.15 ms
// of the commit's reply). *store.Store implements it.
type CommitStore interface {
	Commit(id object.ID) (*store.Commit, error)
}

// itemOverhead approximates what the cache's bookkeeping costs per object.
const itemOverhead = 128

// getter reads objects from a Store through a Cache. It is the
// extents.Getter every File's reader uses, so chunks and extent nodes are
// cached and shared across files and views.
type getter struct {
	s Store
	c *Cache
}

var (
	_ extents.Getter     = (*getter)(nil)
	_ extents.Prefetcher = (*getter)(nil)
)

// Get returns an object's bytes, from the cache when it holds them. A
// failure is an *ObjectError. A chunk's bytes are a copy, since the
// cached buffer is recycled once evicted (see chunk): File reads chunks
// with getter.chunk instead.
func (g *getter) Get(id object.ID, k object.Kind) ([]byte, error) {
	if k == object.KindChunk {
		ch, err := g.chunk(id)
		if err != nil {
			return nil, err
		}
		defer ch.release()
		return append([]byte(nil), ch.data...), nil
	}
	v, err := g.c.get(id, func() (any, int64, error) {
		data, err := g.s.Get(id, k)
		if err != nil {
			return nil, 0, &ObjectError{Kind: k, ID: id, Err: err}
		}
		return data, int64(len(data)) + itemOverhead, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]byte), nil
}

// Prefetch queues objects for the Cache's read-ahead workers, which load
// them in batches (extents asks for a file's leaves so).
func (g *getter) Prefetch(ids []object.ID, k object.Kind) {
	for len(ids) > 0 {
		n := min(len(ids), prefetchBatch)
		g.c.pre.add(g, ids[:n], k)
		ids = ids[n:]
	}
}

// chunk returns a chunk, held: the caller must release it.
func (g *getter) chunk(id object.ID) (*chunk, error) {
	v, err := g.c.get(id, func() (any, int64, error) {
		data, err := g.s.Get(id, object.KindChunk)
		if err != nil {
			return nil, 0, &ObjectError{Kind: object.KindChunk, ID: id, Err: err}
		}
		ch := wrapChunk(data)
		return ch, ch.cost(), nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*chunk), nil
}

// loadClaimed loads objects claimed in the cache (see Cache.claim) and
// publishes each, with one Store call when the Store can batch. It
// returns how many loaded. Errors are not cached: a reader meets them
// again and reports them with its path.
func (g *getter) loadClaimed(ids []object.ID, loads map[object.ID]*cacheLoad, k object.Kind) int {
	n := 0
	var index []store.TreeNode // large directories' roots: assembled after the batch read
	var bufs map[*byte]*chunk  // the pooled chunks GetManyInto fills, by buffer
	publish := func(id object.ID, data []byte, err error) {
		l, ok := loads[id]
		if !ok {
			return
		}
		if err == nil && k == object.KindTree && store.IsTreeIndex(data) {
			index = append(index, store.TreeNode{ID: id, Data: data})
			return
		}
		delete(loads, id)
		var val any
		var cost int64
		if err == nil {
			val, cost, err = decode(k, data, bufs)
		}
		if err != nil {
			g.c.publish(id, l, nil, 0, &ObjectError{Kind: k, ID: id, Err: err})
			return
		}
		g.c.publish(id, l, val, cost, nil)
		if ch, ok := val.(*chunk); ok {
			ch.release() // the loader's reference: nobody here reads it
		}
		n++
	}
	var err error
	if is, ok := g.s.(IntoStore); ok && k == object.KindChunk && len(ids) > 1 {
		bufs = map[*byte]*chunk{}
		alloc := func(n int) []byte {
			ch := newChunk(n)
			bufs[unsafe.SliceData(ch.data)] = ch
			return ch.data
		}
		err = is.GetManyInto(ids, k, alloc, publish)
	} else if bs, ok := g.s.(BatchStore); ok && len(ids) > 1 {
		err = bs.GetMany(ids, k, publish)
	} else {
		for _, id := range ids {
			data, err := g.s.Get(id, k)
			publish(id, data, err)
		}
	}
	for _, ix := range index {
		if t, err := g.loadTree(ix.Data); err != nil {
			g.c.publish(ix.ID, loads[ix.ID], nil, 0, &ObjectError{Kind: k, ID: ix.ID, Err: err})
		} else {
			g.c.publish(ix.ID, loads[ix.ID], t, treeCost(t), nil)
			n++
		}
		delete(loads, ix.ID)
	}
	for id := range loads { // never reported: the call failed as a whole
		publish(id, nil, fmt.Errorf("batch read: %w", err))
	}
	return n
}

// decode turns an object's bytes into what the cache keeps for it: a
// *chunk for a chunk — the pooled one in bufs whose buffer holds data, if
// any —, a decoded *store.Tree for a tree, the bytes themselves otherwise.
func decode(k object.Kind, data []byte, bufs map[*byte]*chunk) (any, int64, error) {
	switch k {
	case object.KindChunk:
		ch := bufs[unsafe.SliceData(data)]
		switch {
		case ch == nil:
			ch = wrapChunk(data)
		case len(ch.data) != len(data):
			// Not GetManyInto's contract. Wrapping data would share the
			// pooled buffer with a chunk that no longer owns it.
			return nil, 0, fmt.Errorf("%d bytes in a buffer of %d", len(data), len(ch.data))
		}
		return ch, ch.cost(), nil
	case object.KindTree:
	default:
		return data, int64(len(data)) + itemOverhead, nil
	}
	t, err := store.DecodeTree(data)
	if err != nil {
		return nil, 0, err
	}
	return t, treeCost(t), nil
}

// tree returns a decoded tree.
func (g *getter) tree(id object.ID) (*store.Tree, error) {
	v, err := g.c.get(id, func() (any, int64, error) {
		data, err := g.s.Get(id, object.KindTree)
		var t *store.Tree
		if err == nil {
			t, err = g.loadTree(data)
		}
		if err != nil {
			return nil, 0, &ObjectError{Kind: object.KindTree, ID: id, Err: err}
		}
		return t, treeCost(t), nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*store.Tree), nil
}

// loadTree decodes a directory from its root node, reading the nodes
// below a large one's root (in one query when the Store can batch).
func (g *getter) loadTree(data []byte) (*store.Tree, error) {
	fetch := func(ids []object.ID) ([][]byte, error) {
		out := make([][]byte, len(ids))
		for i, id := range ids {
			var err error
			if out[i], err = g.s.Get(id, object.KindTree); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	if bs, ok := g.s.(BatchStore); ok {
		fetch = store.ManyFetcher(bs.GetMany)
	}
	t, _, err := store.LoadTree(data, fetch)
	return t, err
}

// treeCost approximates the memory a decoded tree holds.
func treeCost(t *store.Tree) int64 {
	cost := int64(itemOverhead)
	for i := range t.Entries {
		e := &t.Entries[i]
		cost += 112 + int64(len(e.Name)+len(e.Target))
	}
	return cost
}

// commit reads and decodes a commit. Commits are read once per View, so
// they bypass the cache.
func (g *getter) commit(id object.ID) (*store.Commit, error) {
	if cs, ok := g.s.(CommitStore); ok {
		c, err := cs.Commit(id)
		if err != nil {
			return nil, &ObjectError{Kind: object.KindCommit, ID: id, Err: err}
		}
		return c, nil
	}
	data, err := g.s.Get(id, object.KindCommit)
	if err != nil {
		return nil, &ObjectError{Kind: object.KindCommit, ID: id, Err: err}
	}
	c, err := store.DecodeCommit(data)
	if err != nil {
		return nil, &ObjectError{Kind: object.KindCommit, ID: id, Err: fmt.Errorf("decode: %w", err)}
	}
	return c, nil
}
