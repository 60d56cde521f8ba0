package extents

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/layerfs/layerfs/object"
)

// parallelCuts returns the chunk lengths cutParallel gives, checking that
// the chunks it feeds are the content, in order.
func parallelCuts(t *testing.T, data []byte, seg, over int64, workers int) []int {
	t.Helper()
	var lens []int
	var fed []byte
	n, err := cutParallel(bytes.NewReader(data), seg, over, workers, func(b []byte) error {
		lens, fed = append(lens, len(b)), append(fed, b...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(len(data)) || !bytes.Equal(fed, data) {
		t.Fatalf("cutParallel fed %d bytes, not the content's %d", n, len(data))
	}
	return lens
}

// TestCutParallelMatchesCutChunks is the property WriteAt rests on: cut in
// segments and stitched, any content gives exactly the chunks of cutting
// it whole — with segments that meet in their overhang, and with none
// (over 0 often misses, so the segment is cut again from the true cut).
func TestCutParallelMatchesCutChunks(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	size := 3 << 20
	workerCounts := []int{1, 2, 4}
	segs := []int64{ChunkMax / 2, ChunkMax + 1, 100 << 10, 1 << 20}
	if testing.Short() || raceEnabled {
		size, workerCounts, segs = 512<<10, []int{2}, []int64{ChunkMax + 1, 100 << 10}
	}
	contents := map[string][]byte{
		"empty":   nil,
		"one":     {7},
		"random":  randBytes(5, size+12345),
		"zeros":   make([]byte, size+3),
		"mixed":   mixedBytes(rng, size),
		"pattern": bytes.Repeat(randBytes(4, 1000), size/1000), // period shorter than a chunk
	}
	for name, data := range contents {
		want, _ := cuts(t, data)
		for _, seg := range segs {
			for _, over := range []int64{0, ChunkMin, overhang} {
				for _, workers := range workerCounts {
					got := parallelCuts(t, data, seg, over, workers)
					if !slices.Equal(got, want) {
						t.Fatalf("%s, segments of %d, overhang %d, %d workers: %d chunks differ from cutting whole (%d)",
							name, seg, over, workers, len(got), len(want))
					}
				}
			}
		}
	}
}

// TestCutParallelRandomSplits checks the property over random content
// shapes and segment sizes.
func TestCutParallelRandomSplits(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	rounds, size := 20, 3<<20
	if testing.Short() || raceEnabled {
		rounds, size = 5, 1<<20
	}
	for range rounds {
		data := mixedBytes(rng, 1+rng.IntN(size))
		want, _ := cuts(t, data)
		seg := int64(1 + rng.IntN(512<<10))
		over := int64(rng.IntN(4 * ChunkMax))
		if got := parallelCuts(t, data, seg, over, 1+rng.IntN(4)); !slices.Equal(got, want) {
			t.Fatalf("%d bytes in segments of %d, overhang %d: chunks differ from cutting whole", len(data), seg, over)
		}
	}
}

func TestCutParallelStopsAtError(t *testing.T) {
	boom := errors.New("boom")
	calls := 0
	_, err := cutParallel(bytes.NewReader(randBytes(6, 2<<20)), 256<<10, overhang, 2, func([]byte) error {
		if calls++; calls == 20 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || calls != 20 {
		t.Fatalf("cutParallel = %v after %d chunks, want boom after 20", err, calls)
	}
}

func TestWriteAtMatchesWrite(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 36))
	sizes := []int{0, 1, SmallFileMax - 1, SmallFileMax, 2*segmentSize - 1, 2*segmentSize + 17, 3*segmentSize + 12345}
	if testing.Short() || raceEnabled {
		sizes = []int{0, SmallFileMax, 2*segmentSize + 17}
	}
	for _, n := range sizes {
		data := mixedBytes(rng, n)
		s := NewTestStore(t)
		want := MustWrite(t, NewMemStore(), data)
		got, err := WriteAt(s, bytes.NewReader(data), int64(n))
		if err != nil || got != want {
			t.Fatalf("%d bytes: WriteAt = %s/%d, %v; Write = %s/%d", n, got.ID.Short(), got.Size, err, want.ID.Short(), want.Size)
		}
		if err := Check(s, got); err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
	}
}

// A size that is wrong — the file grew or shrank since it was measured —
// still gives the content's File: WriteAt reads to the end.
func TestWriteAtWrongSize(t *testing.T) {
	for _, n := range []int{SmallFileMax / 2, 3 * segmentSize} {
		data := randBytes(7, n)
		want := MustWrite(t, NewMemStore(), data)
		sizes := []int64{0, int64(n) / 3, 3 * segmentSize, 5 * segmentSize}
		if testing.Short() || raceEnabled {
			sizes = []int64{int64(n) / 3, 5 * segmentSize}
		}
		for _, size := range sizes {
			got, err := WriteAt(NewTestStore(t), bytes.NewReader(data), size)
			if err != nil || got != want {
				t.Fatalf("%d bytes said to be %d: WriteAt = %s/%d, %v; want %s", n, size, got.ID.Short(), got.Size, err, want.ID.Short())
			}
		}
	}
}

func TestWriteAtFails(t *testing.T) {
	s := NewMemStore()
	s.FailPutsAfter(10)
	if _, err := WriteAt(s, bytes.NewReader(randBytes(9, 3*segmentSize)), 3*segmentSize); err == nil {
		t.Fatal("WriteAt into a failing Store succeeded")
	}
}

// heapStore names chunks and keeps nothing, and records the most heap in
// use at any of its calls, after a collection.
type heapStore struct {
	hashStore
	calls int
	peak  uint64
}

func (h *heapStore) PutChunk(data []byte, base object.ID) (object.ID, error) {
	if h.calls++; h.calls%512 == 0 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		h.peak = max(h.peak, m.HeapInuse)
	}
	return h.hashStore.PutChunk(data, base)
}

// TestWriteAtLetsGo checks that WriteAt holds a few segments of a big
// file at a time, not all it has cut: a file of many segments is stored
// with the heap far below its size (2 cores: ~22 MiB for 128 MiB; it had
// held all 128).
func TestWriteAtLetsGo(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("writes 128 MiB")
	}
	size := 128 << 20
	r := &zeroFreeReader{size: int64(size)}
	s := &heapStore{}
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	if _, err := WriteAt(s, r, int64(size)); err != nil {
		t.Fatal(err)
	}
	grew := int64(s.peak) - int64(m.HeapInuse)
	t.Logf("heap grew by at most %.1f MiB", float64(grew)/(1<<20))
	// The segments cut ahead, one per core, and those being stored.
	if bound := int64(runtime.GOMAXPROCS(0)+6) * (segmentSize + 1<<20); grew > bound {
		t.Fatalf("heap grew by %d MiB while storing a %d MiB file", grew>>20, size>>20)
	}
}

// zeroFreeReader is size bytes of pseudo-random content, made as read:
// the test holds none of it.
type zeroFreeReader struct{ size int64 }

func (z *zeroFreeReader) ReadAt(p []byte, off int64) (int, error) {
	if off >= z.size {
		return 0, io.EOF
	}
	n := min(int64(len(p)), z.size-off)
	for i := range p[:n] {
		x := uint64(off+int64(i)) * 0x9e3779b97f4a7c15
		p[i] = byte(x>>56 ^ x>>29)
	}
	if n < int64(len(p)) {
		return int(n), io.EOF
	}
	return int(n), nil
}
