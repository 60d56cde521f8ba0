package store

import (
	"bytes"
	"sync"

	"github.com/layerfs/layerfs/object"
)

// Bounds on the decoded objects kept in memory. Objects are immutable, so
// a cached one never goes stale; the bounds only keep memory in check.
const (
	treeCacheMax     = 16384
	treeNodeCacheMax = 8192 // ~2 KB each
	commitCacheMax   = 4096
	extentCacheMax   = 2048 // 2–9 KB each
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

// Extent nodes are cached by the Store, as read and as written: a
// Workspace that edits a big file again and again patches, each time, the
// version its last commit wrote, and reading its extent nodes back was
// ~0.2 ms of each commit (four or five queries). Callers get a copy.

func (s *Store) cachedExtent(id object.ID) ([]byte, bool) {
	raw, ok := s.extents.get(id)
	if !ok {
		return nil, false
	}
	return bytes.Clone(raw), true
}

// rememberExtents caches the extent nodes among objs, which a write
// transaction just committed.
func (s *Store) rememberExtents(objs []*pendingObject) {
	for _, o := range objs {
		if o.kind == object.KindExtent && o.written {
			s.extents.add(o.id, bytes.Clone(o.raw))
		}
	}
}
