package lowerfs

import (
	"runtime"
	"testing"
	"time"
)

func freeCount(class int) int {
	f := &freeChunks[class]
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.list)
}

func TestChunkBuffersAreRecycled(t *testing.T) {
	c := newChunk(5000)
	class := (cap(c.data) - 1) / bufClass
	if len(c.data) != 5000 || cap(c.data) != 2*bufClass {
		t.Fatalf("a chunk of 5000 bytes has len %d cap %d", len(c.data), cap(c.data))
	}
	c.hold(1)
	c.release()
	n := freeCount(class)
	c.release()
	if freeCount(class) != n+1 {
		t.Fatal("the last release did not return the buffer")
	}
	if d := newChunk(6000); &d.data[:1][0] != &c.data[:1][0] {
		t.Error("a new chunk of the same class did not reuse the buffer")
	}
}

// A chunk dropped while still held (go-fuse skips Done for an interrupted
// request) gives its buffer back once collected.
func TestLeakedChunkReturnsItsBuffer(t *testing.T) {
	c := newChunk(3 * bufClass)
	class := (cap(c.data) - 1) / bufClass
	n := freeCount(class)
	c = nil
	for i := 0; i < 100 && freeCount(class) == n; i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if freeCount(class) != n+1 {
		t.Error("a leaked chunk's buffer did not come back")
	}
}
