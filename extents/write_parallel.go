package extents

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"sync"
)

// Cutting a large file into chunks is its capture's slowest stage (the
// rolling hash runs at ~650 MB/s on one core), and a cut depends on the
// bytes since the previous cut. WriteAt still cuts on every core: it
// splits the file into segments, cuts each from its own start as if a cut
// were there, and stitches them. A segment's cutter goes on a little past
// the segment's end (the overhang); where one of those cuts is also a cut
// of the next segment, the two agree from there on (a cut depends only on
// the bytes after the cut before it: TestChunkerRestartsAtCuts), so the
// next segment's chunks are taken from that cut. In content with cuts of
// its own — anything but long runs with no cut before ChunkMax — they meet
// within a chunk or two. When they do not meet in the overhang, the next
// segment is cut again from the true cut, on the stitching goroutine, so
// the chunks are always exactly those Write cuts. Within a segment, read
// into memory whole, the same stitching joins four lanes that one core
// cuts at once (cutRegion, rabin.go).
const (
	segmentSize = 4 << 20
	overhang    = 8 * ChunkMax
)

// WriteAt is WriteConcurrent for content that can be read at any offset,
// such as a file, of about size bytes (it reads to r's end, wherever that
// is): it cuts chunks on every core as well as hashing and storing them
// there. The result is the File Write makes.
func WriteAt(s Store, r io.ReaderAt, size int64) (File, error) {
	workers := runtime.GOMAXPROCS(0)
	if workers < 2 || size < 2*segmentSize {
		return WriteConcurrent(s, io.NewSectionReader(r, 0, math.MaxInt64))
	}
	w := newChunkWriter(s, workers)
	n, err := cutParallel(r, segmentSize, overhang, workers, w.put)
	if err == nil && n < SmallFileMax {
		// It shrank under the small-file limit meanwhile: a small file is
		// one chunk, so store it as Write would.
		w.wait()
		return WriteConcurrent(s, io.NewSectionReader(r, 0, math.MaxInt64))
	}
	return w.finish(err)
}

// cutSpan is a segment's chunks, cut from start as if a cut were there,
// up to the first cut at or past end+over, or r's end.
type cutSpan struct {
	offs   []int64 // where each chunk starts
	chunks [][]byte
	eof    bool // the last chunk ends at r's end
	err    error
}

// cutSpanOf reads r from start and cuts its chunks, as if a cut were at
// start, up to the first cut at or past end+over, or r's end. The chunks
// are slices of one buffer that holds the span.
func cutSpanOf(r io.ReaderAt, start, end, over int64) *cutSpan {
	sp := &cutSpan{}
	stop := end + over - start // every chunk of the span starts before stop
	// A chunk that starts before stop ends before stop+ChunkMax.
	buf := make([]byte, stop+ChunkMax)
	n, err := r.ReadAt(buf, start)
	if err != nil && err != io.EOF {
		sp.err = fmt.Errorf("cut chunks: %w", err)
		return sp
	}
	data := buf[:n]
	prev := 0
	for _, e := range cutRegion(data, int(stop)) {
		sp.offs, sp.chunks = append(sp.offs, start+int64(prev)), append(sp.chunks, data[prev:e:e])
		prev = e
	}
	sp.eof = n < len(buf) && prev == n
	return sp
}

// Within a span, cutRegion cuts lanes of at least laneMin bytes, each
// going on laneOver past the next one's start to meet its cuts.
const (
	laneMin  = 4 * ChunkMax
	laneOver = 2 * ChunkMax
)

// cutRegion returns the ends of data's chunks, cut from data[0] as if a
// cut were there, for as long as one starts before stop: the chunks
// cutChunks finds. It cuts four lanes at once and stitches them as
// cutParallel stitches segments: a lane's chunks are taken from the
// first cut of the lane before it that is also one of its own. Where
// the lane before ends without meeting it, the chunks are cut one at a
// time from the last true cut until they do.
func cutRegion(data []byte, stop int) []int {
	t := rabin()
	stop = min(stop, len(data))
	if stop < lanes*laneMin {
		l := lane{from: 0, to: stop}
		l.cut(t, data)
		return l.ends
	}
	var ls [lanes]lane
	q := stop / lanes
	for k := range ls {
		ls[k] = lane{from: k * q, to: (k+1)*q + laneOver}
	}
	ls[lanes-1].to = stop
	cutLanes(data, &ls)
	ends := make([]int, 0, len(ls[0].ends)+len(ls[1].ends)+len(ls[2].ends)+len(ls[3].ends))
	k, i := 0, 0 // ls[k].ends[i] is the next true end, if i is in range
	for pos := 0; pos < stop; {
		if i < len(ls[k].ends) {
			pos = ls[k].ends[i]
			i++
		} else {
			n, _ := t.next(data[pos:])
			pos += n
		}
		ends = append(ends, pos)
		// Move on to the next lane where it meets this one, or where it
		// no longer can.
		for k+1 < lanes && pos >= ls[k+1].from {
			next := &ls[k+1]
			if pos == next.from {
				k, i = k+1, 0
			} else if j, ok := slices.BinarySearch(next.ends, pos); ok {
				k, i = k+1, j+1
			} else if len(next.ends) == 0 || pos > next.ends[len(next.ends)-1] {
				k, i = k+1, len(next.ends)
				continue
			}
			break
		}
	}
	return ends
}

// startsAt reports whether one of the span's chunks starts at off, and
// which.
func (sp *cutSpan) startsAt(off int64) (int, bool) {
	return slices.BinarySearch(sp.offs, off)
}

// spans cuts segments in the background, a few ahead of the one asked
// for.
type spans struct {
	r         io.ReaderAt
	seg, over int64
	ahead     int
	cut       []chan *cutSpan
	got       []*cutSpan
	wg        sync.WaitGroup
}

// get returns segment j's span, waiting for it, and starts cutting the
// segments after it.
func (s *spans) get(j int) *cutSpan {
	for len(s.cut) <= j+s.ahead {
		k := int64(len(s.cut))
		ch := make(chan *cutSpan, 1)
		s.cut, s.got = append(s.cut, ch), append(s.got, nil)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			ch <- cutSpanOf(s.r, k*s.seg, (k+1)*s.seg, s.over)
		}()
	}
	if s.got[j] == nil {
		s.got[j] = <-s.cut[j]
	}
	return s.got[j]
}

// done lets segment j's span go: its chunks belong to whoever they were
// fed to, and the span's buffer is freed once they are done with them.
// Kept, every span of a file stayed in memory until its capture ended.
func (s *spans) done(j int) {
	s.got[j], s.cut[j] = nil, nil
}

// cutParallel feeds every chunk of r to fn, in order, exactly as
// cutChunks would, cutting segments of seg bytes on workers goroutines,
// and returns how many bytes it fed. fn owns the slices it is given.
func cutParallel(r io.ReaderAt, seg, over int64, workers int, fn func([]byte) error) (int64, error) {
	s := &spans{r: r, seg: seg, over: over, ahead: workers - 1}
	defer s.wg.Wait()
	var pos int64 // the end of the chunks fed so far: a true cut
	for j := 0; ; j++ {
		sp := s.get(j)
		i, ok := sp.startsAt(pos)
		if !ok {
			// The overhang before did not meet this segment's cuts.
			sp = cutSpanOf(r, pos, int64(j+1)*seg, over)
			i = 0
		}
		if sp.err != nil {
			return pos, sp.err
		}
		met := false
		for ; i < len(sp.chunks) && !met; i++ {
			if err := fn(sp.chunks[i]); err != nil {
				return pos, err
			}
			pos = sp.offs[i] + int64(len(sp.chunks[i]))
			if pos >= int64(j+1)*seg && !(sp.eof && i == len(sp.chunks)-1) {
				_, met = s.get(j + 1).startsAt(pos)
			}
		}
		if sp.eof && !met {
			return pos, nil
		}
		s.done(j)
	}
}
