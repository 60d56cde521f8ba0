package extents

import (
	"sync"

	"github.com/restic/chunker"
)

// The rolling hash restic's chunker cuts with, computed here too, to cut
// content that is already in memory faster than restic's chunker can.
//
// restic's chunker keeps a Rabin fingerprint of the last 64 bytes: the
// bytes as a polynomial over GF(2), modulo Polynomial. Its digest after a
// byte is that fingerprint exactly, whatever came before the window: it
// starts a chunk from zero, skips the chunk's first ChunkMin-64 bytes
// unhashed, and the byte it seeds the window with has left the window by
// the time the chunk is ChunkMin long, the first place it may cut. So a
// chunk that starts at s ends at the first e in [s+ChunkMin, s+ChunkMax]
// where the fingerprint of the 64 bytes before e has its low
// chunkAverageBits bits zero, else at s+ChunkMax — a rule any code
// computing the same fingerprint follows to the same cuts
// (TestRabinMatchesChunker checks it against restic's).
//
// Each step of the hash waits for a table lookup that depends on the step
// before, so one chunker leaves most of a core idle: ~650 MB/s here. The
// lanes below cut four regions at once, four independent chains of steps
// the core runs side by side: 1.0–1.5 GB/s on one core of this machine
// (less when the machine is busy: the chains share the core's units).
const (
	rabinWindow = 64
	// rabinShift brings a digest's top byte down: Polynomial's degree
	// (53) less 8.
	rabinShift = 45
)

// rabinTables are the fingerprint's lookup tables: mod[b] reduces a
// digest whose top byte (above the degree) is b, clearing that byte;
// out[b] is the fingerprint of b followed by 63 zero bytes, which adding
// takes b out of the window.
type rabinTables struct {
	mod, out [256]uint64
}

var rabin = sync.OnceValue(func() *rabinTables {
	t := &rabinTables{}
	deg := Polynomial.Deg()
	if deg-8 != rabinShift {
		panic("extents: Polynomial's degree does not match rabinShift")
	}
	for b := range 256 {
		top := uint64(b) << deg
		t.mod[b] = uint64(chunker.Pol(top).Mod(Polynomial)) | top
		h := chunker.Pol(b)
		for range rabinWindow - 1 {
			h = (h << 8).Mod(Polynomial)
		}
		t.out[b] = uint64(h)
	}
	return t
})

// step adds byte in to digest d, in whose window out is the oldest byte.
func (t *rabinTables) step(d uint64, out, in byte) uint64 {
	d ^= t.out[out]
	return (d<<8 | uint64(in)) ^ t.mod[byte(d>>rabinShift)]
}

// start returns the digest of a chunk that starts at data[0] once it is
// ChunkMin long, and whether it cuts there. data holds at least ChunkMin
// bytes.
func (t *rabinTables) start(data []byte) (d uint64, cut bool) {
	for _, b := range data[ChunkMin-rabinWindow : ChunkMin] {
		d = (d<<8 | uint64(b)) ^ t.mod[byte(d>>rabinShift)]
	}
	return d, d&chunkSplitMask == 0
}

// next returns the length of the chunk that starts at data[0], cut where
// restic's chunker would, and whether it ended at a real cut (realCut)
// rather than at the end of data.
func (t *rabinTables) next(data []byte) (int, bool) {
	if len(data) < ChunkMin {
		return len(data), false
	}
	d, cut := t.start(data)
	if cut || len(data) == ChunkMin {
		return ChunkMin, cut
	}
	end := min(len(data), ChunkMax)
	for p := ChunkMin; p < end; p++ {
		d = t.step(d, data[p-rabinWindow], data[p])
		if d&chunkSplitMask == 0 {
			return p + 1, true
		}
	}
	return end, end == ChunkMax
}

// lanes is how many regions cutLanes cuts at once.
const lanes = 4

// lane is one region cutLanes cuts: chunks from from, as if a cut were
// there, for as long as one starts before to. Their ends go to ends.
type lane struct {
	from, to int
	ends     []int

	// The chunk in progress: it starts at start, has been hashed up to
	// pos with digest d, and ends at lim at the latest.
	start, pos, lim int
	d               uint64
	done            bool
}

// begin starts the lane's next chunk at l.start, taking the chunks that
// end at ChunkMin or at the end of data as they come; it reports whether
// a chunk is in progress.
func (l *lane) begin(t *rabinTables, data []byte) bool {
	for {
		if l.start >= l.to || l.start >= len(data) {
			l.done = true
			return false
		}
		if len(data)-l.start <= ChunkMin {
			l.end(len(data))
			continue
		}
		d, cut := t.start(data[l.start:])
		if cut {
			l.end(l.start + ChunkMin)
			continue
		}
		l.d, l.pos, l.lim = d, l.start+ChunkMin, min(l.start+ChunkMax, len(data))
		return true
	}
}

func (l *lane) end(at int) {
	l.ends = append(l.ends, at)
	l.start = at
}

// cut cuts the lane's chunks alone.
func (l *lane) cut(t *rabinTables, data []byte) {
	l.start = l.from
	l.begin(t, data)
	l.finish(t, data)
}

// finish cuts the rest of the lane's chunks alone.
func (l *lane) finish(t *rabinTables, data []byte) {
	for !l.done {
		d, end := l.d, l.lim
		for p := l.pos; p < l.lim; p++ {
			d = t.step(d, data[p-rabinWindow], data[p])
			if d&chunkSplitMask == 0 {
				end = p + 1
				break
			}
		}
		l.end(end)
		l.begin(t, data)
	}
}

// cutLanes cuts every lane's chunks of data, four at a time in one
// loop: each lane's chain of hash steps is independent of the others',
// so the core overlaps them. Once a lane is done, the others finish
// alone.
func cutLanes(data []byte, ls *[lanes]lane) {
	t := rabin()
	live := 0
	for k := range ls {
		l := &ls[k]
		l.start = l.from
		if l.begin(t, data) {
			live++
		}
	}
	for live == lanes {
		n := ls[0].lim - ls[0].pos
		for k := 1; k < lanes; k++ {
			n = min(n, ls[k].lim-ls[k].pos)
		}
		// Each lane's next n bytes, and the bytes leaving its window:
		// slices of one length, so the loop needs no bounds checks.
		in0, in1, in2, in3 := data[ls[0].pos:ls[0].pos+n], data[ls[1].pos:ls[1].pos+n], data[ls[2].pos:ls[2].pos+n], data[ls[3].pos:ls[3].pos+n]
		out0, out1, out2, out3 := data[ls[0].pos-rabinWindow:], data[ls[1].pos-rabinWindow:], data[ls[2].pos-rabinWindow:], data[ls[3].pos-rabinWindow:]
		out0, out1, out2, out3 = out0[:len(in0)], out1[:len(in0)], out2[:len(in0)], out3[:len(in0)]
		in1, in2, in3 = in1[:len(in0)], in2[:len(in0)], in3[:len(in0)]
		d0, d1, d2, d3 := ls[0].d, ls[1].d, ls[2].d, ls[3].d
		mod, out := &t.mod, &t.out
		i := 0
		for i < len(in0) {
			d0 ^= out[out0[i]]
			d1 ^= out[out1[i]]
			d2 ^= out[out2[i]]
			d3 ^= out[out3[i]]
			d0 = (d0<<8 | uint64(in0[i])) ^ mod[byte(d0>>rabinShift)]
			d1 = (d1<<8 | uint64(in1[i])) ^ mod[byte(d1>>rabinShift)]
			d2 = (d2<<8 | uint64(in2[i])) ^ mod[byte(d2>>rabinShift)]
			d3 = (d3<<8 | uint64(in3[i])) ^ mod[byte(d3>>rabinShift)]
			i++
			if d0&chunkSplitMask == 0 || d1&chunkSplitMask == 0 || d2&chunkSplitMask == 0 || d3&chunkSplitMask == 0 {
				break
			}
		}
		ls[0].d, ls[1].d, ls[2].d, ls[3].d = d0, d1, d2, d3
		for k := range ls {
			l := &ls[k]
			l.pos += i
			if l.d&chunkSplitMask == 0 || l.pos == l.lim {
				l.end(l.pos)
				if !l.begin(t, data) {
					live--
				}
			}
		}
	}
	for k := range ls {
		ls[k].finish(t, data)
	}
}
