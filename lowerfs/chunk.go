package lowerfs

import (
	"sync"
	"sync/atomic"

	"github.com/layerfs/layerfs/extents"
)

// A chunk is a file chunk's bytes as the Cache keeps them: in a buffer
// that goes back to a pool, to be filled with another chunk, once nothing
// uses it — neither the Cache nor any read. Recycling saves what a fresh
// buffer per chunk cost: zeroing it, faulting its pages in and collecting
// it, a third of reading a chunk from the Store.
//
// Whoever uses the bytes holds a reference: the Cache while it keeps the
// chunk, each read (Slices) until the kernel has its reply. Releasing one
// reference too many would hand the buffer to another chunk while a read
// still uses it, so each release matches one hold; a missing release only
// leaves the buffer to the garbage collector.
type chunk struct {
	data   []byte
	refs   atomic.Int32
	pooled bool
}

// Buffers are pooled by capacity, in classes of bufClass bytes up to
// extents.SmallFileMax (a small file is one chunk up to that size).
const bufClass = 4 << 10

var bufPools [extents.SmallFileMax / bufClass]sync.Pool // class i: (i+1)*bufClass

// newChunk returns a chunk of n bytes, holding one reference. Its bytes
// are whatever the buffer held last.
func newChunk(n int) *chunk {
	class := max(n-1, 0) / bufClass
	if class >= len(bufPools) {
		c := &chunk{data: make([]byte, n)}
		c.refs.Store(1)
		return c
	}
	c, _ := bufPools[class].Get().(*chunk)
	if c == nil {
		c = &chunk{data: make([]byte, (class+1)*bufClass), pooled: true}
	}
	c.data = c.data[:n]
	c.refs.Store(1)
	return c
}

// wrapChunk makes a chunk of bytes that are not pooled (a Store's Get).
func wrapChunk(data []byte) *chunk {
	c := &chunk{data: data}
	c.refs.Store(1)
	return c
}

func (c *chunk) hold(n int32) { c.refs.Add(n) }

// release drops a reference; the last one returns the buffer to its pool.
func (c *chunk) release() {
	switch n := c.refs.Add(-1); {
	case n > 0:
	case n < 0:
		panic("lowerfs: chunk released more often than held")
	case c.pooled:
		bufPools[(cap(c.data)-1)/bufClass].Put(c)
	}
}

// cost is what keeping the chunk costs the Cache.
func (c *chunk) cost() int64 { return int64(cap(c.data)) + itemOverhead }
