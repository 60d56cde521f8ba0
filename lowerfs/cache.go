package lowerfs

import (
	"container/list"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/layerfs/layerfs/object"
)

// DefaultCacheBytes is the size of the Cache a View makes when given none.
const DefaultCacheBytes = 128 << 20

// Cache holds decoded objects — decompressed chunks, extent nodes, decoded
// trees — up to a byte budget, evicting the least recently used. Objects
// are immutable and named by content, so one Cache may serve every View of
// a Store, and nothing in it is ever stale. It is safe for concurrent use.
type Cache struct {
	max int64

	mu       sync.Mutex
	used     int64
	items    map[object.ID]*list.Element // of *cacheItem
	lru      list.List                   // front: most recently used
	inflight map[object.ID]*cacheLoad

	pre   *prefetcher
	stats cacheCounters
}

type cacheItem struct {
	id   object.ID
	val  any
	cost int64
}

// cacheLoad is one load in progress; later askers wait on done. A chunk
// loaded is held once for each of the waiters.
type cacheLoad struct {
	done    chan struct{}
	val     any
	err     error
	waiters int32 // guarded by Cache.mu
}

type cacheCounters struct {
	hits, misses, evictions, prefetched atomic.Int64
}

// CacheStats counts what a Cache did.
type CacheStats struct {
	Bytes, MaxBytes int64
	Items           int
	Hits, Misses    int64 // lookups served from memory / loaded from the Store
	Evictions       int64
	Prefetched      int64 // objects loaded by read-ahead
}

// NewCache returns a Cache holding up to maxBytes of decoded objects, with
// one read-ahead worker per core. maxBytes <= 0 means DefaultCacheBytes.
func NewCache(maxBytes int64) *Cache {
	if maxBytes <= 0 {
		maxBytes = DefaultCacheBytes
	}
	c := &Cache{
		max:      maxBytes,
		items:    map[object.ID]*list.Element{},
		inflight: map[object.ID]*cacheLoad{},
	}
	c.pre = newPrefetcher(c, runtime.GOMAXPROCS(0))
	return c
}

// Close stops the read-ahead workers. Loads still work afterwards, without
// read-ahead.
func (c *Cache) Close() { c.pre.close() }

// Stats returns the Cache's counters.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	bytes, items := c.used, len(c.items)
	c.mu.Unlock()
	return CacheStats{
		Bytes: bytes, MaxBytes: c.max, Items: items,
		Hits: c.stats.hits.Load(), Misses: c.stats.misses.Load(),
		Evictions: c.stats.evictions.Load(), Prefetched: c.stats.prefetched.Load(),
	}
}

// loadFunc produces an object's decoded value and what it costs to keep.
type loadFunc func() (val any, cost int64, err error)

// get returns the value cached for id, or loads it with fn once however
// many callers ask at the same time. A *chunk comes held for the caller,
// who must release it; fn's holds one reference, which becomes the
// caller's.
func (c *Cache) get(id object.ID, fn loadFunc) (any, error) {
	c.mu.Lock()
	if el, ok := c.items[id]; ok {
		c.lru.MoveToFront(el)
		val := el.Value.(*cacheItem).val
		if ch, ok := val.(*chunk); ok {
			ch.hold(1)
		}
		c.mu.Unlock()
		c.stats.hits.Add(1)
		return val, nil
	}
	if l, ok := c.inflight[id]; ok {
		l.waiters++
		c.mu.Unlock()
		<-l.done
		c.stats.hits.Add(1)
		return l.val, l.err
	}
	l := &cacheLoad{done: make(chan struct{})}
	c.inflight[id] = l
	c.mu.Unlock()
	c.stats.misses.Add(1)
	val, cost, err := fn()
	c.publish(id, l, val, cost, err)
	return val, err
}

// claim registers loads for those of ids that are neither cached nor being
// loaded, and returns them in order: the caller must publish each.
func (c *Cache) claim(ids []object.ID) ([]object.ID, map[object.ID]*cacheLoad) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var todo []object.ID
	loads := map[object.ID]*cacheLoad{}
	for _, id := range ids {
		_, cached := c.items[id]
		_, loading := c.inflight[id]
		if !cached && !loading {
			todo = append(todo, id)
			loads[id] = &cacheLoad{done: make(chan struct{})}
			c.inflight[id] = loads[id]
		}
	}
	c.stats.misses.Add(int64(len(todo)))
	return todo, loads
}

// publish ends a load: waiters get its result, and the cache keeps a
// success.
//
// A *chunk published keeps the reference it came with, its loader's; the
// Cache and each waiter get one of their own.
func (c *Cache) publish(id object.ID, l *cacheLoad, val any, cost int64, err error) {
	l.val, l.err = val, err
	c.mu.Lock()
	delete(c.inflight, id)
	if err == nil {
		c.insert(id, val, cost)
		if ch, ok := val.(*chunk); ok {
			ch.hold(l.waiters)
		}
	}
	c.mu.Unlock()
	close(l.done)
}

// insert adds a value and evicts from the cold end until the budget holds.
// c.mu must be held. A value larger than the whole budget is not kept.
func (c *Cache) insert(id object.ID, val any, cost int64) {
	if cost > c.max {
		return
	}
	if _, ok := c.items[id]; ok {
		return
	}
	if ch, ok := val.(*chunk); ok {
		ch.hold(1)
	}
	c.items[id] = c.lru.PushFront(&cacheItem{id: id, val: val, cost: cost})
	c.used += cost
	for c.used > c.max {
		c.evictOldest()
	}
}

func (c *Cache) evictOldest() {
	el := c.lru.Back()
	it := el.Value.(*cacheItem)
	c.lru.Remove(el)
	delete(c.items, it.id)
	c.used -= it.cost
	if ch, ok := it.val.(*chunk); ok {
		ch.release()
	}
	c.stats.evictions.Add(1)
}
