package extents

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRabinMatchesChunker checks the rolling hash computed here against
// restic's chunker: the same chunks, and the same real cuts, in content of
// every shape and in short content around the chunk bounds.
func TestRabinMatchesChunker(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	size := 2 << 20
	if testing.Short() || raceEnabled {
		size = 512 << 10
	}
	contents := map[string][]byte{
		"random":  randBytes(7, size),
		"zeros":   make([]byte, size),
		"mixed":   mixedBytes(rng, size),
		"pattern": bytes.Repeat(randBytes(8, 1000), size/1000),
		"ones":    bytes.Repeat([]byte{0xff}, size),
	}
	for _, n := range []int{0, 1, ChunkMin - 1, ChunkMin, ChunkMin + 1, ChunkMax - 1, ChunkMax, ChunkMax + 1} {
		contents["random "+string(rune('a'+len(contents)))] = randBytes(uint64(n), n)
		contents["zeros "+string(rune('a'+len(contents)))] = make([]byte, n)
	}
	tab := rabin()
	for name, data := range contents {
		want, wantReal := cuts(t, data)
		var got []int
		var gotReal []bool
		for rest := data; len(rest) > 0; {
			n, real := tab.next(rest)
			got, gotReal = append(got, n), append(gotReal, real)
			rest = rest[n:]
		}
		if !slices.Equal(got, want) || !slices.Equal(gotReal, wantReal) {
			t.Fatalf("%s (%d bytes): %d chunks, want %d; real cuts %v, want %v", name, len(data), len(got), len(want), gotReal, wantReal)
		}
	}
}

// laneEnds is what a lane from..to should find: the ends of restic's
// chunks of data[from:], for as long as one starts before to.
func laneEnds(t *testing.T, data []byte, from, to int) []int {
	t.Helper()
	var ends []int
	if from >= len(data) {
		return nil
	}
	lens, _ := cuts(t, data[from:])
	for pos, i := from, 0; i < len(lens) && pos < to; i++ {
		pos += lens[i]
		ends = append(ends, pos)
	}
	return ends
}

// TestCutLanes checks that each of four lanes cut at once finds the
// chunks restic's chunker finds from the lane's start, whatever the
// lanes' lengths and wherever they start: lanes that end together or one
// by one, empty ones, and ones that run into the end of the content.
func TestCutLanes(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	rounds := 60
	if testing.Short() || raceEnabled {
		rounds = 15
	}
	for r := range rounds {
		size := rng.IntN(1 << 20)
		var data []byte
		switch r % 3 {
		case 0:
			data = randBytes(rng.Uint64(), size)
		case 1:
			data = mixedBytes(rng, size)
		default:
			data = make([]byte, size)
		}
		var ls [lanes]lane
		for k := range ls {
			from := rng.IntN(size + 1)
			to := from + rng.IntN(size-from+ChunkMax)
			if r%5 == 0 {
				to = from // empty
			}
			ls[k] = lane{from: from, to: to}
		}
		cutLanes(data, &ls)
		for k, l := range ls {
			if want := laneEnds(t, data, l.from, l.to); !slices.Equal(l.ends, want) {
				t.Fatalf("round %d, %d bytes: lane %d (%d..%d) cut %d chunks, want %d", r, size, k, l.from, l.to, len(l.ends), len(want))
			}
		}
	}
}
