package lowerfs

import (
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/extents"
)

// A chunk is a file chunk's bytes as the Cache keeps them: in a buffer
// that goes back to a free list, to be filled with another chunk, once
// nothing uses it — neither the Cache nor any read. Recycling saves what a
// fresh buffer per chunk cost: zeroing it, faulting its pages in and
// collecting it, a third of reading a chunk from the Store.
//
// Whoever uses the bytes holds a reference: the Cache while it keeps the
// chunk, each read (Slices) until the kernel has its reply. Releasing one
// reference too many would hand the buffer to another chunk while a read
// still uses it, so each release matches one hold. A missing release (go-
// fuse skips Done for an interrupted request) is made good when the chunk
// becomes garbage: a cleanup returns its buffer.
type chunk struct {
	data   []byte
	refs   atomic.Int32
	pooled bool
}

// Buffers are pooled by capacity, in classes of bufClass bytes up to
// extents.SmallFileMax (a small file is one chunk up to that size).
const bufClass = 4 << 10

var freeChunks [extents.SmallFileMax / bufClass]struct { // class i: (i+1)*bufClass
	mu   sync.Mutex
	list []*chunk
}

// newChunk returns a chunk of n bytes, holding one reference. Its bytes
// are whatever the buffer held last.
func newChunk(n int) *chunk {
	class := max(n-1, 0) / bufClass
	if class >= len(freeChunks) {
		c := &chunk{data: make([]byte, n)}
		c.refs.Store(1)
		return c
	}
	f := &freeChunks[class]
	f.mu.Lock()
	var c *chunk
	if k := len(f.list); k > 0 {
		c = f.list[k-1]
		f.list[k-1] = nil // else a leaked chunk would stay reachable
		f.list = f.list[:k-1]
	}
	f.mu.Unlock()
	if c == nil {
		c = pooledChunk(slabAlloc((class + 1) * bufClass))
	}
	c.data = c.data[:n]
	c.refs.Store(1)
	return c
}

// pooledChunk wraps a buffer from a slab, with the cleanup that returns
// the buffer should the chunk be dropped while still held.
func pooledChunk(buf []byte) *chunk {
	c := &chunk{data: buf, pooled: true}
	runtime.AddCleanup(c, func(buf []byte) { putFree(pooledChunk(buf)) }, buf[:cap(buf)])
	return c
}

func putFree(c *chunk) {
	f := &freeChunks[(cap(c.data)-1)/bufClass]
	f.mu.Lock()
	f.list = append(f.list, c)
	f.mu.Unlock()
}

// wrapChunk makes a chunk of bytes that are not pooled (a Store's Get).
func wrapChunk(data []byte) *chunk {
	c := &chunk{data: data}
	c.refs.Store(1)
	return c
}

func (c *chunk) hold(n int32) { c.refs.Add(n) }

// release drops a reference; the last one returns the buffer to its free
// list.
func (c *chunk) release() {
	switch n := c.refs.Add(-1); {
	case n > 0:
	case n < 0:
		panic("lowerfs: chunk released more often than held")
	case c.pooled:
		putFree(c)
	}
}

// cost is what keeping the chunk costs the Cache.
func (c *chunk) cost() int64 { return int64(cap(c.data)) + itemOverhead }

// Pooled buffers are cut from slabs of slabSize bytes mapped outside Go's
// heap and backed by transparent huge pages where the kernel allows
// (MADV_HUGEPAGE): faulting a 2 MiB page in at a time and pinning
// buffers for the kernel's copy (go-fuse's writev) cost ~10% less CPU on a
// 1 GiB read than buffers from Go's heap. Slabs are never unmapped: the
// free lists keep their buffers, whose number is bounded by what the Cache
// and reads in flight hold at once.
const slabSize = 32 << 20

var slab struct {
	mu   sync.Mutex
	left []byte
}

// slabAlloc returns n bytes of a slab; Go's heap if mapping one fails.
func slabAlloc(n int) []byte {
	slab.mu.Lock()
	defer slab.mu.Unlock()
	if len(slab.left) < n {
		b, err := unix.Mmap(-1, 0, slabSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return make([]byte, n)
		}
		unix.Madvise(b, unix.MADV_HUGEPAGE) // best effort
		slab.left = b
	}
	b := slab.left[:n:n]
	slab.left = slab.left[n:]
	return b
}
