package store

import (
	"sync"

	"github.com/layerfs/layerfs/object"
)

// Bounds on the decoded objects kept in memory. Objects are immutable, so
// a cached one never goes stale; the bounds only keep memory in check.
const (
	treeCacheMax     = 16384
	treeNodeCacheMax = 8192 // ~2 KB each
	commitCacheMax   = 4096
)

// cache keeps decoded objects by ID. What it hands out is shared: callers
// must not modify it.
type cache[V any] struct {
	mu  sync.Mutex
	m   map[object.ID]V
	max int
}

func (c *cache[V]) get(id object.ID) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[id]
	return v, ok
}

func (c *cache[V]) add(id object.ID, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[object.ID]V{}
	}
	if len(c.m) >= c.max {
		// Evict about half, in map order: cheap, and good enough for
		// entries that never go stale.
		n := 0
		for k := range c.m {
			delete(c.m, k)
			if n++; n >= c.max/2 {
				break
			}
		}
	}
	c.m[id] = v
}

// CacheCommit remembers a commit this process just landed. c must not be
// modified afterwards.
func (s *Store) CacheCommit(id object.ID, c *Commit) { s.commits.add(id, c) }
