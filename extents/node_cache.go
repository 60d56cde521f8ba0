package extents

import (
	"fmt"
	"sync"

	"github.com/layerfs/layerfs/object"
)

// node is a decoded Node with the end offset of each entry, relative to the
// node's first byte, for binary search.
type node struct {
	Node
	ends []int64
}

func newNode(n Node) *node {
	ends := make([]int64, len(n.Entries))
	var off int64
	for i, e := range n.Entries {
		off += e.Len
		ends[i] = off
	}
	return &node{Node: n, ends: ends}
}

func (n *node) size() int64 { return n.ends[len(n.ends)-1] }

// find returns the index of the entry holding relative offset rel.
func (n *node) find(rel int64) int {
	lo, hi := 0, len(n.ends)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if n.ends[m] > rel {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

// startOf returns entry i's offset relative to the node's first byte.
func (n *node) startOf(i int) int64 {
	if i == 0 {
		return 0
	}
	return n.ends[i-1]
}

// nodeCacheEntries bounds each of a nodeCache's two generations, counted in
// entries (about 48 bytes each): two generations hold every node of a
// 2 GiB file.
const nodeCacheEntries = 1 << 16

// nodeCache keeps decoded nodes by ID in two generations: lookups promote
// from the old one, and when the current one is full it becomes the old one.
// That approximates LRU at the cost of two map lookups.
type nodeCache struct {
	mu       sync.Mutex
	cur, old map[object.ID]*node
	entries  int // entries held by cur
}

func (c *nodeCache) get(id object.ID) *node {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, ok := c.cur[id]; ok {
		return n
	}
	n, ok := c.old[id]
	if ok {
		c.addLocked(id, n)
	}
	return n
}

func (c *nodeCache) add(id object.ID, n *node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.addLocked(id, n)
}

func (c *nodeCache) addLocked(id object.ID, n *node) {
	if c.cur == nil || c.entries+len(n.Entries) > nodeCacheEntries {
		c.old, c.cur, c.entries = c.cur, make(map[object.ID]*node), 0
	}
	c.cur[id] = n
	c.entries += len(n.Entries)
}

// loader fetches and decodes nodes through a cache.
type loader struct {
	s     Getter
	cache nodeCache
}

// anyLevel asks loader.node not to check a node's level (for roots).
const anyLevel = -1

// node returns node id, checking that it is at level (unless anyLevel) and
// covers size bytes, as its parent says.
func (l *loader) node(id object.ID, level int, size int64) (*node, error) {
	n := l.cache.get(id)
	if n == nil {
		var err error
		if n, err = l.fetch(id); err != nil {
			return nil, err
		}
		l.cache.add(id, n)
		if p, ok := l.s.(Prefetcher); ok && n.Level == 1 {
			leaves := make([]object.ID, len(n.Entries))
			for i, e := range n.Entries {
				leaves[i] = e.ID
			}
			p.Prefetch(leaves, object.KindExtent)
		}
	}
	if (level != anyLevel && n.Level != level) || n.size() != size {
		return nil, fmt.Errorf("extent node %s: level %d size %d where level %d size %d was expected: %w",
			id.Short(), n.Level, n.size(), level, size, object.ErrCorrupt)
	}
	return n, nil
}

func (l *loader) fetch(id object.ID) (*node, error) {
	data, err := l.s.Get(id, object.KindExtent)
	if err != nil {
		return nil, fmt.Errorf("get extent node %s: %w", id.Short(), err)
	}
	n, err := DecodeNode(data)
	if err != nil {
		return nil, fmt.Errorf("extent node %s: %w", id.Short(), err)
	}
	return newNode(n), nil
}
