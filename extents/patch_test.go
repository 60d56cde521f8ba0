package extents

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/layerfs/layerfs/object"
)

// putLog records what reaches the Store under it.
type putLog struct {
	Store
	ids []object.ID
}

func (p *putLog) PutChunk(data []byte, base object.ID) (object.ID, error) {
	id, err := p.Store.PutChunk(data, base)
	p.ids = append(p.ids, id)
	return id, err
}

func (p *putLog) PutNode(data []byte) (object.ID, error) {
	id, err := p.Store.PutNode(data)
	p.ids = append(p.ids, id)
	return id, err
}

// editBytes makes a new version of old by a few random edits of the kinds
// a command makes in place: overwrites here and there, a truncate, an
// append.
func editBytes(rng *rand.Rand, old []byte) []byte {
	b := bytes.Clone(old)
	for range 1 + rng.IntN(4) {
		switch rng.IntN(5) {
		case 0:
			b = b[:rng.IntN(len(b)+1)]
		case 1:
			b = append(b, randBytes(rng.Uint64(), rng.IntN(300<<10))...)
		default:
			if len(b) == 0 {
				continue
			}
			off := rng.IntN(len(b))
			copy(b[off:], randBytes(rng.Uint64(), 1+rng.IntN(40<<10)))
		}
	}
	return b
}

func TestPatchMatchesWrite(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for i := range 60 {
		old := mixedBytes(rng, rng.IntN(3<<20))
		s := NewTestStore(t)
		f := MustWrite(t, s, old)
		edited := editBytes(rng, old)
		ranges, err := Diff(s, f, bytes.NewReader(edited), int64(len(edited)), math.MaxInt64)
		if err != nil {
			t.Fatalf("case %d: diff: %v", i, err)
		}
		for _, r := range ranges {
			if r.Len <= 0 || r.End() > int64(len(edited)) {
				t.Fatalf("case %d: bad range %+v of %d bytes", i, r, len(edited))
			}
		}
		log := &putLog{Store: s}
		g, err := Patch(log, f, bytes.NewReader(edited), int64(len(edited)), ranges)
		if err != nil {
			t.Fatalf("case %d: patch: %v", i, err)
		}
		if err := Check(s, g); err != nil {
			t.Fatalf("case %d: check: %v", i, err)
		}
		checkContent(t, s, g, edited, rng)
		reach := map[object.ID]bool{}
		Walk(s, g, func(id object.ID, _ object.Kind) error { reach[id] = true; return nil })
		for _, id := range log.ids {
			if !reach[id] {
				t.Fatalf("case %d: patch stored %s, which the result does not name", i, id.Short())
			}
		}
	}
}

func TestDiffFindsTheChange(t *testing.T) {
	s := NewTestStore(t)
	old := randBytes(1, 4<<20)
	f := MustWrite(t, s, old)
	ranges, err := Diff(s, f, bytes.NewReader(old), int64(len(old)), 0)
	if err != nil || len(ranges) != 0 {
		t.Fatalf("same content: %v, %v", ranges, err)
	}
	edited := bytes.Clone(old)
	copy(edited[3<<20+5:], "0123456789")
	ranges, err = Diff(s, f, bytes.NewReader(edited), int64(len(edited)), ChunkMax)
	if err != nil || len(ranges) != 1 || ranges[0].Len > ChunkMax || ranges[0].Off > 3<<20+5 || ranges[0].End() < 3<<20+15 {
		t.Fatalf("10 bytes overwritten: %v, %v", ranges, err)
	}
	before := s.Stats()
	g, err := Patch(s, f, bytes.NewReader(edited), int64(len(edited)), ranges)
	if err != nil {
		t.Fatal(err)
	}
	checkContent(t, s, g, edited, rand.New(rand.NewPCG(1, 2)))
	if n := s.Stats().NewBytes - before.NewBytes; n > 4*ChunkMax+20<<10 {
		t.Errorf("a 10-byte patch stored %d bytes", n)
	}
}

func TestDiffGivesUpOnShiftedContent(t *testing.T) {
	s := NewTestStore(t)
	old := randBytes(2, 8<<20)
	f := MustWrite(t, s, old)
	prepended := append([]byte("0123456789"), old...)
	_, err := Diff(s, f, bytes.NewReader(prepended), int64(len(prepended)), 1<<20)
	if !errors.Is(err, ErrTooDifferent) {
		t.Fatalf("prepend: %v, want ErrTooDifferent", err)
	}
}

func TestPatchLongAppend(t *testing.T) {
	s := NewTestStore(t)
	old := randBytes(3, 2<<20)
	f := MustWrite(t, s, old)
	long := append(bytes.Clone(old), randBytes(4, 2*patchPiece+12345)...)
	copy(long[100<<10:], "changed")
	ranges, err := Diff(s, f, bytes.NewReader(long), int64(len(long)), 1<<20)
	if err != nil || len(ranges) != 2 {
		t.Fatalf("diff: %v, %v", ranges, err)
	}
	g, err := Patch(s, f, bytes.NewReader(long), int64(len(long)), ranges)
	if err != nil {
		t.Fatal(err)
	}
	checkContent(t, s, g, long, rand.New(rand.NewPCG(3, 4)))
}

// TestSpliceMatchesWrite: insertions, deletions and replacements of other
// lengths anywhere in a file give the File Write makes of the result, and
// store about the change.
func TestSpliceMatchesWrite(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for i := range 200 {
		old := mixedBytes(rng, rng.IntN(2<<20))
		if i%10 == 0 {
			old = old[:min(len(old), rng.IntN(SmallFileMax+100))]
		}
		s := NewTestStore(t)
		f := MustWrite(t, s, old)
		off := int64(rng.IntN(len(old) + 1))
		del := int64(rng.IntN(len(old) - int(off) + 1))
		if rng.IntN(3) == 0 {
			del = min(del, int64(rng.IntN(64)))
		}
		data := randBytes(rng.Uint64(), rng.IntN(3)*rng.IntN(50<<10))
		want := append(append(bytes.Clone(old[:off]), data...), old[off+del:]...)
		before := s.Stats()
		g, err := Splice(s, f, off, del, data)
		if err != nil {
			t.Fatalf("case %d: splice %d for %d at %d of %d: %v", i, len(data), del, off, len(old), err)
		}
		if err := Check(s, g); err != nil {
			t.Fatalf("case %d: check: %v", i, err)
		}
		checkContent(t, s, g, want, rng)
		if grown := s.Stats().NewBytes - before.NewBytes; len(old) > 1<<20 && grown > int64(len(data))+int64(del)+8*ChunkMax+64<<10 {
			t.Errorf("case %d: splice of %d for %d stored %d bytes", i, len(data), del, grown)
		}
	}
}

func TestSplicePrepend(t *testing.T) {
	s := NewTestStore(t)
	old := randBytes(41, 8<<20)
	f := MustWrite(t, s, old)
	before := s.Stats()
	g, err := Splice(s, f, 0, 0, []byte("0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	checkContent(t, s, g, append([]byte("0123456789"), old...), rand.New(rand.NewPCG(1, 1)))
	if n := s.Stats().NewBytes - before.NewBytes; n > 3*ChunkMax+32<<10 {
		t.Errorf("prepending 10 bytes stored %d bytes", n)
	}
}

// getLog counts the chunks read through the Store under it.
type getLog struct {
	Store
	chunks int
}

func (g *getLog) Get(id object.ID, k object.Kind) ([]byte, error) {
	if k == object.KindChunk {
		g.chunks++
	}
	return g.Store.Get(id, k)
}

// TestPatchSupersetRanges patches with ranges wider than the change, as
// capture finds them in block maps (whole pages, neighbours merged), some
// so close that the chunks cut for one take in the next: the result is
// still the File Write makes, and the bytes around a change come from
// the new version, not from the Store, where no range still to apply
// lies.
func TestPatchSupersetRanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	const page = 4 << 10
	for i := range 12 {
		old := mixedBytes(rng, 256<<10+rng.IntN(768<<10))
		s := NewTestStore(t)
		f := MustWrite(t, s, old)
		edited := bytes.Clone(old)
		var ranges []Range
		for off := rng.IntN(64 << 10); off < len(edited); off += page * (1 + rng.IntN(20)) {
			n := 1 + rng.IntN(64)
			copy(edited[off:], randBytes(rng.Uint64(), n))
			lo, hi := int64(off/page*page), int64(min(len(edited), (off+n+page-1)/page*page))
			if k := len(ranges); k > 0 && ranges[k-1].End() >= lo {
				ranges[k-1].Len = max(ranges[k-1].End(), hi) - ranges[k-1].Off
			} else {
				ranges = append(ranges, Range{Off: lo, Len: hi - lo})
			}
			if i%2 == 0 {
				break // one change: nothing to read through the Store
			}
		}
		log := &getLog{Store: s}
		g, err := Patch(log, f, bytes.NewReader(edited), int64(len(edited)), ranges)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if want := MustWrite(t, NewTestStore(t), edited); g != want {
			t.Fatalf("case %d (%d ranges): Patch made %v, Write makes %v", i, len(ranges), g, want)
		}
		checkContent(t, s, g, edited, rng)
		if len(ranges) == 1 && log.chunks > 0 {
			t.Fatalf("case %d: one change read %d chunks through the Store", i, log.chunks)
		}
	}
}
