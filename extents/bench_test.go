package extents

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/layerfs/layerfs/object"
)

// randReader is an endless stream of pseudo-random bytes.
type randReader struct{ r *rand.ChaCha8 }

func (r randReader) Read(p []byte) (int, error) { return r.r.Read(p) }

var gib struct {
	once sync.Once
	s    *MemStore
	f    File
	err  error
}

// gibFile is a 1 GiB file of random bytes in a MemStore, built once.
func gibFile(b *testing.B) (*MemStore, File) {
	gib.once.Do(func() {
		gib.s = NewMemStore()
		src := io.LimitReader(randReader{rand.NewChaCha8([32]byte{1})}, 1<<30)
		gib.f, gib.err = Write(gib.s, src)
	})
	if gib.err != nil {
		b.Fatal(gib.err)
	}
	return gib.s, gib.f
}

// BenchmarkOverwrite4KiBIn1GiB overwrites 4 KiB at a random offset of the
// same 1 GiB file, each time from the original.
func BenchmarkOverwrite4KiBIn1GiB(b *testing.B) {
	s, f := gibFile(b)
	rng := rand.New(rand.NewPCG(1, 2))
	patch := randBytes(3, 4<<10)
	before := s.Stats()
	for b.Loop() {
		patch[0]++
		if _, err := Overwrite(s, f, rng.Int64N(f.Size-int64(len(patch))), patch); err != nil {
			b.Fatal(err)
		}
	}
	st := s.Stats()
	b.ReportMetric(float64(st.NewBytes-before.NewBytes)/float64(b.N), "stored-B/op")
	b.ReportMetric(float64(st.Gets-before.Gets)/float64(b.N), "gets/op")
	b.ReportMetric(float64(st.Puts-before.Puts)/float64(b.N), "puts/op")
	b.ReportMetric(float64(st.PutBytes-before.PutBytes)/float64(b.N), "put-B/op")
}

// BenchmarkRandomRead4KiB reads 4 KiB at random offsets of a 1 GiB file
// through one Reader.
func BenchmarkRandomRead4KiB(b *testing.B) {
	s, f := gibFile(b)
	r := NewReader(s, f)
	rng := rand.New(rand.NewPCG(4, 5))
	p := make([]byte, 4<<10)
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		if _, err := r.ReadAt(p, rng.Int64N(f.Size-int64(len(p)))); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reads/s")
}

// BenchmarkWrite chunks and stores 64 MiB of random bytes.
func BenchmarkWrite(b *testing.B) {
	data := randBytes(7, 64<<20)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := WriteBytes(NewMemStore(), data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteLarge32MiB stores 32 MiB of random bytes as capture does a
// new file, cutting on one goroutine (WriteConcurrent) or on every core
// (WriteAt), into a Store that only hashes.
func BenchmarkWriteLarge32MiB(b *testing.B) {
	data := randBytes(8, 32<<20)
	for _, c := range []struct {
		name  string
		write func(Store, []byte) (File, error)
	}{
		{"WriteConcurrent", func(s Store, d []byte) (File, error) { return WriteConcurrent(s, bytes.NewReader(d)) }},
		{"WriteAt", func(s Store, d []byte) (File, error) { return WriteAt(s, bytes.NewReader(d), int64(len(d))) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := c.write(hashStore{}, data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// hashStore names objects and keeps nothing.
type hashStore struct{}

func (hashStore) PutChunk(data []byte, _ object.ID) (object.ID, error) {
	return object.Sum(object.KindChunk, data), nil
}
func (hashStore) PutNode(data []byte) (object.ID, error) {
	return object.Sum(object.KindExtent, data), nil
}
func (hashStore) Get(object.ID, object.Kind) ([]byte, error) {
	return nil, errors.New("hashStore keeps nothing")
}
