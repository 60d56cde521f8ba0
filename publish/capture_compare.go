package publish

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/extents"
)

// A big file copied up and edited in place is, apart from the edit, a byte
// copy of its lower version, whose pages the copy-up has just read into the
// kernel's cache through the lower mount. Comparing the two files there
// finds the changed ranges with a read and a memcmp: about half the CPU of
// hashing the upper file over the lower's chunks (extents.Diff), which
// capture falls back to when the lower file is not mostly in memory, so
// that comparing would first read it through FUSE.

// The lower file is read with pread, never through a mapping. It is on
// the Store's FUSE mount, which in the daemon this very process serves: a
// page not cached would be read through FUSE on first touch, and a thread
// stuck in that page fault cannot be preempted. With two cores both
// comparing goroutines faulted at once, and held both of Go's Ps, so the
// FUSE server never ran to answer them; a garbage collection's
// stop-the-world would wait for them the same way. A pread is a system
// call, which lets the server run.

// errNotResident: the lower file is not mostly in the page cache.
var errNotResident = errors.New("lower file not in the page cache")

const (
	// residentMin is the share of the lower file's pages that must be in
	// the page cache for a comparison to pay.
	residentMin = 0.9
	// compareBlock is how much of the upper file is read at once, and
	// comparePage the granularity of the ranges found.
	compareBlock = 1 << 20
	comparePage  = 4 << 10
	// joinGap joins changed ranges closer than this: each range is edited
	// a chunk or two beyond its ends anyway.
	joinGap = 2 * extents.ChunkMax
)

// compareLower returns the ranges of the upper file f (size bytes) that
// differ from the lower file at path, which holds lowerSize bytes, as
// extents.Diff does. It fails with errNotResident when the lower file is
// not mostly cached, and with extents.ErrTooDifferent when more than limit
// bytes within lowerSize differ.
func compareLower(f *os.File, size int64, path string, lowerSize, limit int64) ([]extents.Range, error) {
	lower, err := openLower(path, lowerSize)
	if err != nil {
		return nil, err
	}
	defer lower.Close()
	c := comparer{upper: f, lower: lower, common: min(size, lowerSize), limit: limit}
	if err := c.run(); err != nil {
		return nil, err
	}
	return c.ranges(size), nil
}

// openLower opens the lower file at path, which must hold lowerSize bytes,
// for reading. It fails with errNotResident when the file is not the one
// the Commit names, or not mostly cached: then capture hashes instead.
func openLower(path string, lowerSize int64) (*os.File, error) {
	lf, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if fi, err := lf.Stat(); err != nil || fi.Size() != lowerSize || lowerSize == 0 {
		lf.Close()
		return nil, errors.Join(errNotResident, err)
	}
	if !resident(lf, lowerSize) {
		lf.Close()
		return nil, errNotResident
	}
	return lf, nil
}

// resident reports whether at least residentMin of f's pages (size
// bytes) are cached. It maps f only to ask mincore, touching no page.
func resident(f *os.File, size int64) bool {
	m, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return false
	}
	defer unix.Munmap(m)
	pages := (len(m) + os.Getpagesize() - 1) / os.Getpagesize()
	vec := make([]byte, pages)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		return false
	}
	in := 0
	for _, v := range vec {
		in += int(v & 1)
	}
	return float64(in) >= residentMin*float64(pages)
}

// comparer compares the upper file with the lower one over their
// common length, on every core.
type comparer struct {
	upper  *os.File
	lower  *os.File
	common int64
	limit  int64
	found  atomic.Int64
	mu     sync.Mutex
	pages  []int64 // offsets of the comparePages that differ
}

func (c *comparer) run() error {
	workers := int64(runtime.GOMAXPROCS(0))
	blocks := (c.common + compareBlock - 1) / compareBlock
	workers = max(1, min(workers, blocks))
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := blocks*w/workers*compareBlock, min(c.common, blocks*(w+1)/workers*compareBlock)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = c.span(lo, hi)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// span compares [lo, hi) a block at a time.
func (c *comparer) span(lo, hi int64) error {
	buf, lbuf := make([]byte, compareBlock), make([]byte, compareBlock)
	for off := lo; off < hi; off += compareBlock {
		n := min(compareBlock, hi-off)
		if _, err := c.upper.ReadAt(buf[:n], off); err != nil {
			return fmt.Errorf("read at %d: %w", off, err)
		}
		if _, err := c.lower.ReadAt(lbuf[:n], off); err != nil {
			return fmt.Errorf("read lower file at %d: %w", off, err)
		}
		if bytes.Equal(buf[:n], lbuf[:n]) {
			continue
		}
		c.differing(buf[:n], lbuf[:n], off)
		if c.found.Load() > c.limit {
			return extents.ErrTooDifferent
		}
	}
	return nil
}

// differing records the pages of block, at off, that differ from lower's.
func (c *comparer) differing(block, lower []byte, off int64) {
	var pages []int64
	for p := int64(0); p < int64(len(block)); p += comparePage {
		e := min(p+comparePage, int64(len(block)))
		if !bytes.Equal(block[p:e], lower[p:e]) {
			pages = append(pages, off+p)
			c.found.Add(e - p)
		}
	}
	c.mu.Lock()
	c.pages = append(c.pages, pages...)
	c.mu.Unlock()
}

// ranges turns the differing pages, and the bytes past the common length,
// into sorted ranges, joining those closer than joinGap.
func (c *comparer) ranges(size int64) []extents.Range {
	slices.Sort(c.pages)
	var out []extents.Range
	add := func(r extents.Range) {
		if n := len(out); n > 0 && r.Off-out[n-1].End() < joinGap {
			out[n-1].Len = r.End() - out[n-1].Off
			return
		}
		out = append(out, r)
	}
	for _, p := range c.pages {
		add(extents.Range{Off: p, Len: min(comparePage, c.common-p)})
	}
	if size > c.common {
		add(extents.Range{Off: c.common, Len: size - c.common})
	}
	return out
}

// spliceMax bounds the bytes a splice inserts, which capture holds in
// memory; a file changed more is written whole.
const spliceMax = 64 << 20

// spliceLower finds, for an upper file f (size bytes) whose size differs
// from its lower version's at path (lowerSize bytes), the one splice that
// makes it of the lower: the upper is lower[:off] ++ upper[off:off+ins] ++
// lower[off+del:]. It compares the common prefix and suffix in the page
// cache, and fails with errNotResident as compareLower does.
func spliceLower(f *os.File, size int64, path string, lowerSize int64) (off, del, ins int64, err error) {
	if size == 0 {
		return 0, 0, 0, errNotResident
	}
	lower, err := openLower(path, lowerSize)
	if err != nil {
		return 0, 0, 0, err
	}
	defer lower.Close()
	common := min(size, lowerSize)
	prefix, err := commonPrefix(f, lower, common)
	if err != nil {
		return 0, 0, 0, err
	}
	suffix, err := commonSuffix(f, size, lower, lowerSize, common-prefix)
	if err != nil {
		return 0, 0, 0, err
	}
	return prefix, lowerSize - prefix - suffix, size - prefix - suffix, nil
}

// commonPrefix is how many of the first n bytes f and lower share.
func commonPrefix(f, lower *os.File, n int64) (int64, error) {
	buf, lbuf := make([]byte, compareBlock), make([]byte, compareBlock)
	for off := int64(0); off < n; off += compareBlock {
		k := min(compareBlock, n-off)
		b, l := buf[:k], lbuf[:k]
		if _, err := f.ReadAt(b, off); err != nil {
			return 0, fmt.Errorf("read at %d: %w", off, err)
		}
		if _, err := lower.ReadAt(l, off); err != nil {
			return 0, fmt.Errorf("read lower file at %d: %w", off, err)
		}
		if i := firstDiff(b, l); i < len(b) {
			return off + int64(i), nil
		}
	}
	return n, nil
}

// commonSuffix is how many of the last bytes f (size bytes) and lower
// (lowerSize bytes) share, at most n.
func commonSuffix(f *os.File, size int64, lower *os.File, lowerSize, n int64) (int64, error) {
	buf, lbuf := make([]byte, compareBlock), make([]byte, compareBlock)
	for done := int64(0); done < n; {
		k := min(compareBlock, n-done)
		b, l := buf[:k], lbuf[:k]
		if _, err := f.ReadAt(b, size-done-k); err != nil {
			return 0, fmt.Errorf("read at %d: %w", size-done-k, err)
		}
		if _, err := lower.ReadAt(l, lowerSize-done-k); err != nil {
			return 0, fmt.Errorf("read lower file at %d: %w", lowerSize-done-k, err)
		}
		if i := lastDiff(b, l); i >= 0 {
			return done + (k - 1 - int64(i)), nil
		}
		done += k
	}
	return n, nil
}

// firstDiff is the index of the first byte where a and b differ, or
// len(a); b is at least as long as a.
func firstDiff(a, b []byte) int {
	for p := 0; p < len(a); p += comparePage {
		e := min(p+comparePage, len(a))
		if bytes.Equal(a[p:e], b[p:e]) {
			continue
		}
		for i := p; i < e; i++ {
			if a[i] != b[i] {
				return i
			}
		}
	}
	return len(a)
}

// lastDiff is the index of the last byte where a and b, of one length,
// differ, or -1.
func lastDiff(a, b []byte) int {
	for e := len(a); e > 0; e -= comparePage {
		p := max(0, e-comparePage)
		if bytes.Equal(a[p:e], b[p:e]) {
			continue
		}
		for i := e - 1; i >= p; i-- {
			if a[i] != b[i] {
				return i
			}
		}
	}
	return -1
}
