package extents

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/layerfs/layerfs/object"
)

func TestWriteSizes(t *testing.T) {
	s := NewTestStore(t)
	rng := rand.New(rand.NewPCG(4, 4))
	for _, n := range []int{0, 1, 1000, SmallFileMax - 1, SmallFileMax, SmallFileMax + 1, 3 << 20} {
		data := randBytes(uint64(n), n)
		f := MustWrite(t, s, data)
		if want := object.KindExtent; n < SmallFileMax {
			want = object.KindChunk
			if f.ID != object.Sum(object.KindChunk, data) {
				t.Fatalf("%d-byte file is not its one chunk", n)
			}
		} else if f.Kind() != want || !s.Has(f.ID) {
			t.Fatalf("%d-byte file: kind %v", n, f.Kind())
		}
		if g, err := Write(s, bytes.NewReader(data)); err != nil || g != f {
			t.Fatalf("Write and WriteBytes of %d bytes differ: %v", n, err)
		}
		checkContent(t, s, f, data, rng)
	}
}

func TestWriteRepeatedContent(t *testing.T) {
	s := NewTestStore(t)
	rng := rand.New(rand.NewPCG(5, 5))
	zeros := make([]byte, 40<<20)
	if raceEnabled {
		zeros = zeros[:12<<20]
	}
	f := MustWrite(t, s, zeros)
	checkContent(t, s, f, zeros, rng)
	if st := s.Stats(); st.Bytes > 1<<20 {
		t.Fatalf("40 MiB of zeros stored %d bytes", st.Bytes)
	}
	block := randBytes(5, ChunkMax)
	rep := bytes.Repeat(block, 300)
	checkContent(t, s, MustWrite(t, s, rep), rep, rng)
}

func TestReadAtEOF(t *testing.T) {
	s := NewTestStore(t)
	for _, n := range []int{0, 10, SmallFileMax + 10} {
		f := MustWrite(t, s, randBytes(1, n))
		r := NewReader(s, f)
		for _, off := range []int64{int64(n), int64(n) + 5} {
			if k, err := r.ReadAt(make([]byte, 4), off); k != 0 || err != io.EOF {
				t.Fatalf("ReadAt at %d of %d bytes: %d, %v", off, n, k, err)
			}
			if k, err := r.ReadAt(nil, off); k != 0 || err != io.EOF {
				t.Fatalf("empty ReadAt at %d of %d bytes: %d, %v", off, n, k, err)
			}
		}
		if _, err := r.ReadAt(make([]byte, 1), -1); !errors.Is(err, ErrInvalid) {
			t.Fatalf("ReadAt at -1: %v", err)
		}
	}
}

func TestReaderCachesNodes(t *testing.T) {
	s := NewTestStore(t)
	size := 64 << 20
	if testing.Short() || raceEnabled {
		size = 24 << 20
	}
	f, err := WriteBytes(s, randBytes(6, size))
	if err != nil {
		t.Fatal(err)
	}
	nodes := 0
	if err := Walk(s, f, func(_ object.ID, k object.Kind) error {
		if k == object.KindExtent {
			nodes++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	before := s.Stats().NodeGets
	r := NewReader(s, f)
	rng := rand.New(rand.NewPCG(6, 6))
	p := make([]byte, 4096)
	for range 20000 {
		if _, err := r.ReadAt(p, rng.Int64N(int64(size))); err != nil && err != io.EOF {
			t.Fatal(err)
		}
	}
	if got := s.Stats().NodeGets - before; got > nodes {
		t.Fatalf("20000 reads fetched %d nodes of %d", got, nodes)
	}
}

func TestExtents(t *testing.T) {
	s := NewTestStore(t)
	data := randBytes(7, 2<<20)
	f := MustWrite(t, s, data)
	r := NewReader(s, f)
	off, n := int64(300_000), int64(100_000)
	var got []Extent
	for e, err := range r.Extents(off, n) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
	}
	if len(got) == 0 || got[0].Off > off || got[len(got)-1].End() < off+n {
		t.Fatalf("extents %v do not cover [%d, %d)", got, off, off+n)
	}
	for i, e := range got {
		if i > 0 && e.Off != got[i-1].End() {
			t.Fatalf("extents not contiguous: %v", got)
		}
		chunk, err := s.Get(e.Chunk, object.KindChunk)
		if err != nil || !bytes.Equal(chunk, data[e.Off:e.End()]) {
			t.Fatalf("extent %v does not hold the file's bytes: %v", e, err)
		}
	}
	for e, err := range r.Extents(int64(len(data))-1, 100) {
		if err != nil || e.End() != int64(len(data)) {
			t.Fatalf("last extent %v, %v", e, err)
		}
	}
}

func TestWalk(t *testing.T) {
	s := NewTestStore(t)
	data := randBytes(8, 5<<20)
	data = append(data, data...) // repeats: each object once
	f := MustWrite(t, s, data)
	seen := map[object.ID]object.Kind{}
	err := Walk(s, f, func(id object.ID, k object.Kind) error {
		if _, ok := seen[id]; ok {
			t.Fatalf("%s visited twice", id.Short())
		}
		seen[id] = k
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); len(seen) != st.Objects {
		t.Fatalf("walk saw %d objects, store holds %d", len(seen), st.Objects)
	}
	if seen[f.ID] != object.KindExtent {
		t.Fatalf("root not visited as a node")
	}
}

func TestReaderConcurrent(t *testing.T) {
	s := NewTestStore(t)
	data := randBytes(9, 3<<20)
	f := MustWrite(t, s, data)
	r := NewReader(s, f)
	errs := make(chan error, 4)
	for g := range 4 {
		go func() {
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			p := make([]byte, 5000)
			for range 300 {
				off := rng.Int64N(int64(len(data)))
				n, err := r.ReadAt(p, off)
				if (err != nil && err != io.EOF) || !bytes.Equal(p[:n], data[off:off+int64(n)]) {
					errs <- fmt.Errorf("read at %d: %d bytes, %v", off, n, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func TestWriteConcurrentMatchesWrite(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, n := range []int{0, 1, SmallFileMax - 1, SmallFileMax, SmallFileMax + 1, 1 << 20, 5<<20 + 17} {
		data := mixedBytes(rng, n)
		s := NewTestStore(t)
		want := MustWrite(t, NewMemStore(), data)
		got, err := WriteConcurrent(s, bytes.NewReader(data))
		if err != nil || got != want {
			t.Fatalf("%d bytes: WriteConcurrent = %s/%d, %v; Write = %s/%d", n, got.ID.Short(), got.Size, err, want.ID.Short(), want.Size)
		}
		if err := Check(s, got); err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
	}
}

func TestWriteConcurrentFails(t *testing.T) {
	s := NewMemStore()
	s.FailPutsAfter(10)
	if _, err := WriteConcurrent(s, bytes.NewReader(randBytes(9, 4<<20))); err == nil {
		t.Fatal("WriteConcurrent into a failing Store succeeded")
	}
}
