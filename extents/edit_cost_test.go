package extents

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// stored runs fn and returns the bytes of new objects it stored in s.
func stored(t testing.TB, s *MemStore, fn func() (File, error)) (File, int64) {
	t.Helper()
	before := s.Stats().NewBytes
	f, err := fn()
	if err != nil {
		t.Fatal(err)
	}
	return f, s.Stats().NewBytes - before
}

// TestEditCost checks that small edits of a 64 MiB file store about the
// size of the change: a few chunks and one node per level.
func TestEditCost(t *testing.T) {
	const size = 64 << 20
	s := NewTestStore(t)
	data := randBytes(20, size)
	f, err := WriteBytes(s, data)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(20, 20))
	patch := randBytes(21, 4<<10)
	edits := map[string]func() (File, error){
		"overwrite 4 KiB in the middle": func() (File, error) { return Overwrite(s, f, size/2, patch) },
		"overwrite 4 KiB at 0":          func() (File, error) { return Overwrite(s, f, 0, patch) },
		"append 4 KiB":                  func() (File, error) { return Append(s, f, patch) },
		"truncate by 1 byte":            func() (File, error) { return Truncate(s, f, size-1) },
		"extend by 4 KiB":               func() (File, error) { return Truncate(s, f, size+4<<10) },
	}
	for name, edit := range edits {
		g, n := stored(t, s, edit)
		t.Logf("%s: stored %d bytes", name, n)
		if n > 128<<10 {
			t.Errorf("%s stored %d bytes, want at most 128 KiB", name, n)
		}
		if name == "overwrite 4 KiB in the middle" {
			got := make([]byte, 3*len(patch))
			if _, err := NewReader(s, g).ReadAt(got, size/2-4<<10); err != nil {
				t.Fatal(err)
			}
			want := append(append(bytes.Clone(data[size/2-4<<10:size/2]), patch...), data[size/2+4<<10:size/2+8<<10]...)
			if !bytes.Equal(got, want) {
				t.Fatalf("%s: content around the edit differs", name)
			}
		}
	}
	var most int64
	for range 20 {
		off := rng.Int64N(size - 4<<10)
		g, n := stored(t, s, func() (File, error) { return Overwrite(s, f, off, randBytes(rng.Uint64(), 4<<10)) })
		most = max(most, n)
		if n > 128<<10 {
			t.Errorf("overwrite 4 KiB at %d stored %d bytes", off, n)
		}
		if g.Size != f.Size {
			t.Fatalf("overwrite changed the size")
		}
	}
	t.Logf("20 random 4 KiB overwrites: at most %d bytes each", most)
}

// TestPrependCost writes a 32 MiB file and then the same file behind 10 new
// bytes, whole: content-defined chunks and nodes keep all but the first
// chunk and the path to the root.
func TestPrependCost(t *testing.T) {
	const size = 32 << 20
	s := NewTestStore(t)
	data := randBytes(22, size)
	if _, err := WriteBytes(s, data); err != nil {
		t.Fatal(err)
	}
	moved := append([]byte("0123456789"), data...)
	_, n := stored(t, s, func() (File, error) { return WriteBytes(s, moved) })
	t.Logf("prepending 10 bytes to 32 MiB stored %d bytes (%.4f MiB)", n, float64(n)/(1<<20))
	if float64(n) > 0.05*(1<<20) {
		t.Errorf("prepend stored %d bytes, want at most 0.05 MiB", n)
	}
}

// TestRepeatedContentEditCost edits a file of zeros, where every chunk and
// node repeats: boundaries may shift to the end of the run, but what they
// make is mostly there already.
func TestRepeatedContentEditCost(t *testing.T) {
	size := int64(64 << 20)
	if raceEnabled {
		size = 16 << 20
	}
	s := NewTestStore(t)
	f := MustWrite(t, s, make([]byte, size))
	model := make([]byte, size)
	rng := rand.New(rand.NewPCG(23, 23))
	for i := range 6 {
		off := rng.Int64N(size)
		patch := randBytes(uint64(i), 1+rng.IntN(8<<10))
		var n int64
		f, n = stored(t, s, func() (File, error) { return Overwrite(s, f, off, patch) })
		model = modelOverwrite(model, off, patch)
		t.Logf("overwrite %d bytes at %d of zeros: stored %d bytes", len(patch), off, n)
		if n > 128<<10 {
			t.Errorf("overwrite %d bytes at %d stored %d bytes", len(patch), off, n)
		}
	}
	checkContent(t, s, f, model, rng)
}
