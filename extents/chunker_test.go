package extents

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestPolynomialIrreducible(t *testing.T) {
	if !Polynomial.Irreducible() {
		t.Fatalf("Polynomial %v is not irreducible", Polynomial)
	}
	if d := Polynomial.Deg(); d != 53 {
		t.Fatalf("Polynomial has degree %d, want 53", d)
	}
}

// cuts returns the chunk lengths of data and whether each ended at a real cut.
func cuts(t testing.TB, data []byte) ([]int, []bool) {
	t.Helper()
	var lens []int
	var real []bool
	err := cutChunks(bytes.NewReader(data), func(b []byte, cut bool) error {
		lens, real = append(lens, len(b)), append(real, cut)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return lens, real
}

func TestChunkSizes(t *testing.T) {
	size := 64 << 20
	if testing.Short() || raceEnabled {
		size = 16 << 20
	}
	lens, _ := cuts(t, randBytes(1, size))
	for i, l := range lens[:len(lens)-1] {
		if l < ChunkMin || l > ChunkMax {
			t.Fatalf("chunk %d has %d bytes", i, l)
		}
	}
	avg := size / len(lens)
	t.Logf("%d chunks, average %d bytes", len(lens), avg)
	if avg < 14<<10 || avg > 18<<10 {
		t.Fatalf("average chunk %d bytes, want about 16 KiB", avg)
	}
}

// TestChunkerRestartsAtCuts checks what edits rely on: the cuts after a cut
// depend only on the bytes after it. Chunking from any cut, behind any
// other prefix, finds the same later cuts.
func TestChunkerRestartsAtCuts(t *testing.T) {
	data := randBytes(2, 2<<20)
	lens, _ := cuts(t, data)
	rng := rand.New(rand.NewPCG(2, 2))
	off := 0
	for i, l := range lens {
		if i%11 == 3 {
			got, _ := cuts(t, data[off:])
			if !slices.Equal(got, lens[i:]) {
				t.Fatalf("chunking from cut %d at %d gives other cuts", i, off)
			}
			// Another prefix that ends at a real cut gives the same too.
			prefix := randBytes(rng.Uint64(), 100<<10)
			plens, preal := cuts(t, prefix)
			keep := 0
			for j := range plens {
				if preal[j] {
					keep += plens[j]
				}
			}
			got, _ = cuts(t, append(prefix[:keep:keep], data[off:]...))
			if !slices.Equal(got[len(got)-(len(lens)-i):], lens[i:]) {
				t.Fatalf("chunking from cut %d behind another prefix gives other cuts", i)
			}
		}
		off += l
	}
}

// TestChunkWindows checks realCut: chunking content in windows that end
// anywhere, keeping the chunks that end at real cuts and restarting from the
// last one, gives the cuts of chunking it whole.
func TestChunkWindows(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, data := range [][]byte{randBytes(3, 3<<20), make([]byte, 1<<20), mixedBytes(rng, 3<<20)} {
		want, _ := cuts(t, data)
		var got []int
		for pos := 0; pos < len(data); {
			end := min(len(data), pos+1+rng.IntN(3*ChunkMax))
			lens, real := cuts(t, data[pos:end])
			for i, l := range lens {
				if end < len(data) && i == len(lens)-1 && !real[i] {
					break
				}
				got = append(got, l)
				pos += l
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("windowed chunking differs: %d chunks, want %d", len(got), len(want))
		}
	}
}
