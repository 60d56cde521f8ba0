package extents

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/layerfs/layerfs/object"
)

// Range is the n bytes of a file at Off.
type Range struct {
	Off, Len int64
}

// End is the offset just past the range.
func (r Range) End() int64 { return r.Off + r.Len }

// ErrTooDifferent is Diff's answer when the content differs from the file
// in more bytes than it was allowed to find: writing it whole is cheaper.
var ErrTooDifferent = errors.New("content differs too much to patch")

// diffBlock is how many bytes of the new content Diff reads at once, and
// patchPiece the most Patch reads at once.
const (
	diffBlock  = 1 << 20
	patchPiece = 4 << 20
)

// Diff compares size bytes read from src, a new version of the file f,
// with f, chunk by chunk: it hashes the bytes of src over each of f's
// extents and compares that with the extent's chunk ID. It returns the
// ranges of src that may differ from f, in order, adjacent ones joined:
// whole extents whose bytes changed, the part of an extent the new size
// cuts, and the bytes past f's end. Bytes outside the ranges are f's.
// It reads src once, on all cores, and only f's nodes, never its chunks.
//
// Diff gives up with ErrTooDifferent as soon as it finds more than limit
// bytes within f's length that differ: content shifted by an insertion
// differs everywhere after it, and is cheaper to write whole than to
// hash and then patch. Bytes past f's end do not count.
func Diff(s Getter, f File, src io.ReaderAt, size, limit int64) ([]Range, error) {
	common := min(size, f.Size)
	var ext []Extent
	for e, err := range NewReader(s, f).Extents(0, common) {
		if err != nil {
			return nil, fmt.Errorf("diff: %w", err)
		}
		if e.End() > common { // cut by the new size: differs
			e = Extent{Off: e.Off, Len: common - e.Off}
		}
		ext = append(ext, e)
	}
	d := differ{src: src, limit: limit, changed: make([]bool, len(ext))}
	if err := d.run(ext, f.Size != common); err != nil {
		return nil, err
	}
	return d.ranges(ext, size, common), nil
}

// differ hashes the new content over the old extents on every core.
type differ struct {
	src     io.ReaderAt
	limit   int64
	changed []bool // per extent
	found   atomic.Int64
}

// run marks the changed extents; cutLast says the last one was cut short.
func (d *differ) run(ext []Extent, cutLast bool) error {
	if d.found.Load() > d.limit {
		return ErrTooDifferent
	}
	if cutLast && len(ext) > 0 {
		d.changed[len(ext)-1] = true
		d.found.Add(ext[len(ext)-1].Len)
		ext = ext[:len(ext)-1]
	}
	workers := min(runtime.GOMAXPROCS(0), max(1, len(ext)/16))
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := len(ext)*w/workers, len(ext)*(w+1)/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = d.span(ext, lo, hi)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// span compares extents [lo, hi), reading the new content a block at a
// time.
func (d *differ) span(ext []Extent, lo, hi int) error {
	buf := make([]byte, 0, diffBlock+ChunkMax)
	for i := lo; i < hi; {
		j, n := i, int64(0)
		for j < hi && (j == i || n+ext[j].Len <= diffBlock) {
			n += ext[j].Len
			j++
		}
		buf = buf[:n]
		if _, err := d.src.ReadAt(buf, ext[i].Off); err != nil {
			return fmt.Errorf("diff: read at %d: %w", ext[i].Off, err)
		}
		for k := i; k < j; k++ {
			data := buf[ext[k].Off-ext[i].Off:][:ext[k].Len]
			if object.Sum(object.KindChunk, data) != ext[k].Chunk {
				d.changed[k] = true
				d.found.Add(ext[k].Len)
			}
		}
		if d.found.Load() > d.limit {
			return ErrTooDifferent
		}
		i = j
	}
	return nil
}

// ranges joins the changed extents, and the bytes past common, into
// ranges.
func (d *differ) ranges(ext []Extent, size, common int64) []Range {
	var out []Range
	add := func(r Range) {
		if n := len(out); n > 0 && out[n-1].End() == r.Off {
			out[n-1].Len += r.Len
			return
		}
		out = append(out, r)
	}
	for i, e := range ext {
		if d.changed[i] {
			add(Range{Off: e.Off, Len: e.Len})
		}
	}
	if size > common {
		add(Range{Off: common, Len: size - common})
	}
	return out
}

// Patch returns the File of size bytes read from src, a new version of f
// that differs from it only within ranges (as Diff finds them), and
// stores only what that File has and f lacks: the new chunks around each
// range and the nodes above them. The result is the File Write would make
// of src. Objects made on the way and not part of the result, as when
// two ranges share a chunk, are never stored.
func Patch(s Store, f File, src io.ReaderAt, size int64, ranges []Range) (File, error) {
	sc := newScratch(s)
	var most int64
	for _, r := range ranges {
		most = max(most, min(r.Len, patchPiece))
	}
	buf := make([]byte, 0, most)
	g := f
	var err error
	if size < g.Size {
		if g, err = Truncate(sc, g, size); err != nil {
			return File{}, fmt.Errorf("patch: %w", err)
		}
	}
	for i, r := range ranges {
		if r.Off < 0 || r.Len < 0 || r.End() > size {
			return File{}, fmt.Errorf("patch: range %d+%d of %d bytes: %w", r.Off, r.Len, size, ErrInvalid)
		}
		// A long range goes in pieces, so memory stays bounded; each
		// piece after the first re-cuts about a chunk again.
		for off := r.Off; off < r.End(); off += int64(len(buf)) {
			buf = buf[:min(r.End()-off, patchPiece)]
			if _, err := src.ReadAt(buf, off); err != nil {
				return File{}, fmt.Errorf("patch: read at %d: %w", off, err)
			}
			// The old bytes around the piece, which its chunks take in,
			// are src's wherever no range still to apply lies: there src
			// holds what g does, and reads from it cost no query.
			rest := append([]Range{{Off: off + int64(len(buf)), Len: r.End() - off - int64(len(buf))}}, ranges[i+1:]...)
			old := &patchOld{src: src, g: NewReader(sc, g), pending: rest}
			if g, err = overwriteFrom(sc, g, off, buf, old); err != nil {
				return File{}, fmt.Errorf("patch: %w", err)
			}
		}
	}
	if g.Size != size {
		return File{}, fmt.Errorf("patch: ranges make %d bytes of %d: %w", g.Size, size, ErrInvalid)
	}
	if err := sc.keep(g); err != nil {
		return File{}, fmt.Errorf("patch: %w", err)
	}
	return g, nil
}

// patchOld reads the file a Patch has made so far, g: from src, the new
// version, except within the ranges still to apply (pending), where src
// already holds what g does not yet, and which it reads through the
// Store.
type patchOld struct {
	src     io.ReaderAt
	g       *Reader
	pending []Range
}

func (p *patchOld) ReadAt(b []byte, off int64) (int, error) {
	done := 0
	for done < len(b) {
		pos := off + int64(done)
		// From src up to the next pending range; within one, from g up
		// to its end (g is always right; src is quicker).
		from, end := io.ReaderAt(p.src), off+int64(len(b))
		for _, r := range p.pending {
			switch {
			case r.Len == 0 || r.End() <= pos:
			case r.Off <= pos:
				from, end = p.g, min(end, r.End())
			default:
				end = min(end, r.Off)
			}
		}
		n, err := from.ReadAt(b[done:end-off], pos)
		done += n
		if err != nil {
			return done, err
		}
	}
	return done, nil
}
