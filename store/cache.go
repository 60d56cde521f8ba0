package store

import (
	"sync"

	"github.com/layerfs/layerfs/object"
)

// treeCacheMax bounds the decoded trees kept in memory. Trees are
// immutable, so a cached tree never goes stale; the bound only keeps memory
// in check.
const treeCacheMax = 16384

// treeCache keeps decoded trees by ID. The trees it hands out are shared:
// callers must not modify them.
type treeCache struct {
	mu    sync.Mutex
	trees map[object.ID]*Tree
}

func (c *treeCache) get(id object.ID) (*Tree, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.trees[id]
	return t, ok
}

func (c *treeCache) add(id object.ID, t *Tree) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.trees == nil {
		c.trees = map[object.ID]*Tree{}
	}
	if len(c.trees) >= treeCacheMax {
		// Evict about half, in map order: cheap, and good enough for a
		// cache whose entries never go stale.
		n := 0
		for k := range c.trees {
			delete(c.trees, k)
			if n++; n >= treeCacheMax/2 {
				break
			}
		}
	}
	c.trees[id] = t
}
