package extents

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/layerfs/layerfs/object"
)

// model applies the edits to a plain byte slice.
func modelOverwrite(m []byte, off int64, data []byte) []byte {
	if len(data) == 0 {
		return m
	}
	if end := off + int64(len(data)); end > int64(len(m)) {
		m = append(m, make([]byte, end-int64(len(m)))...)
	}
	copy(m[off:], data)
	return m
}

func modelTruncate(m []byte, size int64) []byte {
	if size <= int64(len(m)) {
		return m[:size]
	}
	return append(m, make([]byte, size-int64(len(m)))...)
}

// editer applies random edits to a File and to its model.
type editer struct {
	t     testing.TB
	s     *MemStore
	rng   *rand.Rand
	f     File
	model []byte
}

func newEditer(t testing.TB, s *MemStore, seed uint64, data []byte) *editer {
	return &editer{t: t, s: s, rng: rand.New(rand.NewPCG(seed, seed)), f: MustWrite(t, s, data), model: data}
}

// offset picks an edit offset: 0, the end, past the end, a chunk boundary
// (or next to one), or anywhere.
func (e *editer) offset() int64 {
	size := int64(len(e.model))
	switch e.rng.IntN(6) {
	case 0:
		return 0
	case 1:
		return size
	case 2:
		return size + e.rng.Int64N(200<<10)
	case 3:
		if size > 0 {
			b := e.boundary(e.rng.Int64N(size))
			return max(0, b+e.rng.Int64N(3)-1)
		}
	}
	return e.rng.Int64N(size + 1)
}

// boundary returns the start of the chunk of e.f holding off.
func (e *editer) boundary(off int64) int64 {
	for x, err := range NewReader(e.s, e.f).Extents(off, 1) {
		if err != nil {
			e.t.Fatal(err)
		}
		return x.Off
	}
	return off
}

// data picks edit bytes: small or large, random, zero, or copied.
func (e *editer) data() []byte {
	n := 1 + e.rng.IntN(4<<10)
	switch e.rng.IntN(4) {
	case 0:
		n = 1 + e.rng.IntN(300<<10)
	case 1:
		n = 1 + e.rng.IntN(16)
	}
	if e.rng.IntN(5) == 0 && len(e.model) >= n {
		from := e.rng.IntN(len(e.model) - n + 1)
		return append([]byte(nil), e.model[from:from+n]...)
	}
	return mixedBytes(e.rng, n)
}

// step applies one random edit and returns what it did.
func (e *editer) step() string {
	var err error
	var op string
	switch k := e.rng.IntN(10); {
	case k < 6:
		off, data := e.offset(), e.data()
		op = fmt.Sprintf("overwrite %d at %d", len(data), off)
		e.f, err = Overwrite(e.s, e.f, off, data)
		e.model = modelOverwrite(e.model, off, data)
	case k < 8:
		data := e.data()
		op = fmt.Sprintf("append %d", len(data))
		e.f, err = Append(e.s, e.f, data)
		e.model = append(e.model, data...)
	default:
		size := e.offset()
		if n := int64(len(e.model)); e.rng.IntN(4) == 0 {
			size = e.rng.Int64N(n + 1)
		} else if e.rng.IntN(2) == 0 {
			size = max(0, n-1-e.rng.Int64N(64<<10))
		}
		op = fmt.Sprintf("truncate %d to %d", len(e.model), size)
		e.f, err = Truncate(e.s, e.f, size)
		e.model = modelTruncate(e.model, size)
	}
	if err != nil {
		e.t.Fatalf("%s: %v", op, err)
	}
	return op
}

func TestEditsMatchModel(t *testing.T) {
	sizes := []int{0, 5000, SmallFileMax - 100, SmallFileMax + 100, 600 << 10, 3 << 20, 6 << 20}
	steps := 40
	if raceEnabled {
		sizes, steps = []int{0, 5000, SmallFileMax - 100, SmallFileMax + 100, 600 << 10, 3 << 20}, 25
	}
	if testing.Short() {
		sizes, steps = []int{0, SmallFileMax - 100, SmallFileMax + 100, 2 << 20}, 15
	}
	for i, size := range sizes {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			t.Parallel()
			s := NewTestStore(t)
			rng := rand.New(rand.NewPCG(uint64(i), 9))
			e := newEditer(t, s, uint64(i), mixedBytes(rng, size))
			var sizes []int
			for j := range steps {
				op := e.step()
				if j%8 == 7 {
					if err := Check(s, e.f); err != nil {
						t.Fatalf("step %d, %s: %v", j, op, err)
					}
				}
				checkContent(t, s, e.f, e.model, rng)
				sizes = append(sizes, len(e.model))
			}
			t.Logf("sizes: %v", sizes)
		})
	}
}

func TestEditsAtThreshold(t *testing.T) {
	s := NewTestStore(t)
	rng := rand.New(rand.NewPCG(10, 10))
	f, model := MustWrite(t, s, nil), []byte(nil)
	for _, size := range []int64{SmallFileMax - 1, SmallFileMax, SmallFileMax - 1, SmallFileMax + 1, 10, SmallFileMax * 3, SmallFileMax, 0} {
		var err error
		if f, err = Truncate(s, f, size); err != nil {
			t.Fatal(err)
		}
		model = modelTruncate(model, size)
		checkContent(t, s, f, model, rng)
		data := randBytes(uint64(size), 1+rng.IntN(3))
		off := max(0, size-int64(len(data))+rng.Int64N(3))
		if f, err = Overwrite(s, f, off, data); err != nil {
			t.Fatal(err)
		}
		model = modelOverwrite(model, off, data)
		checkContent(t, s, f, model, rng)
	}
}

func TestEditNoOps(t *testing.T) {
	s := NewTestStore(t)
	data := randBytes(11, 1<<20)
	f := MustWrite(t, s, data)
	before := s.Stats()
	for _, g := range []func() (File, error){
		func() (File, error) { return Overwrite(s, f, 5<<20, nil) },
		func() (File, error) { return Append(s, f, nil) },
		func() (File, error) { return Truncate(s, f, f.Size) },
		func() (File, error) { return Overwrite(s, f, 1000, data[1000:9000]) },
	} {
		if g, err := g(); err != nil || g != f {
			t.Fatalf("no-op edit changed the file: %v", err)
		}
	}
	if st := s.Stats(); st.NewBytes != before.NewBytes {
		t.Fatalf("no-op edits stored %d bytes", st.NewBytes-before.NewBytes)
	}
	if _, err := Overwrite(s, f, -1, []byte{1}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("overwrite at -1: %v", err)
	}
	if _, err := Truncate(s, f, -1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("truncate to -1: %v", err)
	}
}

func TestEditBaseHint(t *testing.T) {
	s := NewTestStore(t)
	data := randBytes(12, 4<<20)
	f := MustWrite(t, s, data)
	mid := int64(2 << 20)
	var old Extent
	for x := range NewReader(s, f).Extents(mid, 1) {
		old = x
	}
	g, err := Overwrite(s, f, mid, []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	var got Extent
	for x := range NewReader(s, g).Extents(mid, 1) {
		got = x
	}
	if b := s.Base(got.Chunk); b != old.Chunk {
		t.Fatalf("new chunk's base %s, want the chunk it replaces %s", b.Short(), old.Chunk.Short())
	}
	small := MustWrite(t, s, []byte("small file"))
	h, err := Overwrite(s, small, 0, []byte("SMALL"))
	if err != nil {
		t.Fatal(err)
	}
	if b := s.Base(h.ID); b != small.ID {
		t.Fatalf("small file's base %s, want %s", b.Short(), small.ID.Short())
	}
}

func TestEditStoreFailures(t *testing.T) {
	s := NewMemStore()
	f := MustWrite(t, s, randBytes(13, 3<<20))
	edit := func() (File, error) { return Overwrite(s, f, 1<<20, randBytes(13, 100<<10)) }
	before := s.Stats()
	if _, err := edit(); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	puts, gets := st.Puts-before.Puts, st.Gets-before.Gets
	for n := range puts {
		s.FailPutsAfter(n)
		if _, err := edit(); !errors.Is(err, ErrInjected) {
			t.Fatalf("overwrite with puts failing after %d of %d: %v", n, puts, err)
		}
	}
	s.FailPutsAfter(-1)
	for n := range gets {
		s.FailGetsAfter(n)
		if _, err := edit(); !errors.Is(err, ErrInjected) {
			t.Fatalf("overwrite with gets failing after %d of %d: %v", n, gets, err)
		}
	}
	s.FailGetsAfter(-1)
	if err := Check(s, f); err != nil {
		t.Fatalf("failed edits damaged the file: %v", err)
	}
}

func TestCorruptObjects(t *testing.T) {
	s := NewTestStore(t)
	data := randBytes(14, 2<<20)
	f := MustWrite(t, s, data)
	var leaf, chunk object.ID
	if err := Walk(s, f, func(id object.ID, k object.Kind) error {
		if k == object.KindChunk && chunk.IsZero() {
			chunk = id
		}
		if k == object.KindExtent {
			leaf = id
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s.Corrupt(chunk, []byte("short"))
	if _, err := NewReader(s, f).ReadAt(make([]byte, 10), 0); !errors.Is(err, object.ErrCorrupt) {
		t.Fatalf("read of a short chunk: %v", err)
	}
	s.Corrupt(leaf, []byte{0, 1})
	if err := Check(s, f); !errors.Is(err, object.ErrCorrupt) {
		t.Fatalf("check of a corrupt node: %v", err)
	}
	if _, err := Overwrite(s, f, f.Size-10, []byte("x")); !errors.Is(err, object.ErrCorrupt) {
		t.Fatalf("edit over a corrupt node: %v", err)
	}
	s.Corrupt(f.ID, Node{Level: 0, Entries: []Entry{{Len: 5, ID: chunk}}}.Encode())
	if _, err := NewReader(s, f).ReadAt(make([]byte, 10), 0); !errors.Is(err, object.ErrCorrupt) {
		t.Fatalf("read through a root of the wrong size: %v", err)
	}
}

// TestEditsDeepTrees runs random edits with a node rule of fan-out 2 to 4,
// so that a few MiB make trees of eight or more levels that grow and shrink.
func TestEditsDeepTrees(t *testing.T) {
	saved := nodeRule
	nodeRule.bits, nodeRule.min, nodeRule.max = 1, 2, 4
	t.Cleanup(func() { nodeRule = saved })
	steps := 60
	if testing.Short() || raceEnabled {
		steps = 25
	}
	for i, size := range []int{SmallFileMax + 1, 1 << 20, 4 << 20} {
		s := NewTestStore(t)
		rng := rand.New(rand.NewPCG(uint64(i), 31))
		e := newEditer(t, s, uint64(i)+100, mixedBytes(rng, size))
		levels := map[int]bool{}
		for j := range steps {
			op := e.step()
			if err := Check(s, e.f); err != nil {
				t.Fatalf("size %d step %d, %s: %v", size, j, op, err)
			}
			checkContent(t, s, e.f, e.model, rng)
			levels[rootLevel(t, s, e.f)] = true
		}
		t.Logf("size %d: root levels seen %v", size, levels)
	}
}

func rootLevel(t testing.TB, s Store, f File) int {
	if f.small() {
		return -1
	}
	n, err := NewReader(s, f).node(f.ID, anyLevel, f.Size)
	if err != nil {
		t.Fatal(err)
	}
	return n.Level
}
