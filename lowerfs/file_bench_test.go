package lowerfs

import (
	"fmt"
	"io"
	"math/rand"
	"sync"
	"testing"

	"github.com/layerfs/layerfs/extents"
	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// benchFileSize is the size of the random (so raw-stored) file the read
// benchmark reads: bigger than the default Cache.
const benchFileSize = 256 << 20

// writeBenchFile stores benchFileSize random bytes in a new Store and
// returns it and a tree holding them as "big".
func writeBenchFile(b *testing.B) (*store.Store, object.ID) {
	b.Helper()
	s, err := store.Open(b.TempDir()+"/bench.layerfs", store.Options{Create: true, Durability: store.Fast})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	bt := s.NewBatch()
	f, err := extents.Write(bt, io.LimitReader(rand.New(rand.NewSource(1)), benchFileSize))
	var tree object.ID
	if err == nil {
		tree, err = bt.PutTree(&store.Tree{Entries: []store.Entry{
			{Name: "big", Type: store.TypeFile, Mode: 0644, Size: f.Size, ID: f.ID}}})
	}
	if ferr := bt.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		b.Fatal(err)
	}
	return s, tree
}

// BenchmarkFileSlicesSequential reads the bench file from start to end
// with Slices, as fusefs serves a sequential reader: requests of one size,
// with up to `par` of them in flight at once (the kernel's read-ahead
// sends several). Each pass uses a fresh Cache, so every chunk comes from
// the Store.
func BenchmarkFileSlicesSequential(b *testing.B) {
	s, tree := writeBenchFile(b)
	for _, c := range []struct {
		req int64
		par int
	}{{128 << 10, 1}, {128 << 10, 4}, {1 << 20, 1}, {1 << 20, 4}} {
		b.Run(fmt.Sprintf("req=%dK/par=%d", c.req>>10, c.par), func(b *testing.B) {
			b.SetBytes(benchFileSize)
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				cache := NewCache(0)
				v := OpenTree(s, tree, Options{Cache: cache})
				e, err := v.Lookup(v.Root(), "big")
				if err != nil {
					b.Fatal(err)
				}
				f, err := v.OpenFile(e)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				readSequential(b, f, c.req, c.par)
				b.StopTimer()
				cache.Close()
				b.StartTimer()
			}
		})
	}
}

// readSequential reads f with Slices in req-sized requests, par at once,
// issued in file order.
func readSequential(b *testing.B, f *File, req int64, par int) {
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var total int64
	for off := int64(0); off < f.Size(); off += req {
		sem <- struct{}{}
		wg.Add(1)
		go func(off int64) {
			defer func() { <-sem; wg.Done() }()
			sl, release, err := f.Slices(off, req)
			if err != nil {
				b.Error(err)
				return
			}
			n := 0
			for _, s := range sl {
				n += len(s)
			}
			release()
			mu.Lock()
			total += int64(n)
			mu.Unlock()
		}(off)
	}
	wg.Wait()
	if total != f.Size() {
		b.Fatalf("read %d bytes, want %d", total, f.Size())
	}
}
