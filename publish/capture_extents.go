package publish

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/extents"
)

// On a filesystem that clones files (XFS with reflink, btrfs), overlayfs
// copies a big file up by cloning its data file (see DataLayer): the upper
// file then shares every block with the data file until a write replaces
// one. Which of its bytes changed is then in the filesystem's block map,
// not in the bytes: a range both files map to the same disk block holds
// the same data. Comparing the two files' FIEMAP extents finds the changed
// ranges of a 32 MiB file without reading any of it.

// FIEMAP's ioctl, flags and structures (linux/fiemap.h), which x/sys/unix
// lacks.
const (
	fsIocFiemap    = 0xC020660B // _IOWR('f', 11, struct fiemap)
	fiemapFlagSync = 0x1        // write the file's dirty pages back first

	fiemapExtentLast = 0x1
	// Extents whose physical address does not say where the bytes are:
	// not allocated yet (delalloc), unknown, encoded (compressed or
	// encrypted), not block-aligned, inline in metadata, or unwritten
	// (reads as zeros whatever the block holds).
	fiemapExtentVague = 0x2 | 0x4 | 0x8 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800

	fiemapBatch = 256 // extents asked for per ioctl
)

type fiemapHeader struct {
	Start, Length           uint64
	Flags, Mapped, Count, _ uint32
}

type fiemapExtent struct {
	Logical, Physical, Length uint64
	_                         [2]uint64
	Flags                     uint32
	_                         [3]uint32
}

// fileExtents lists the extents of f's first size bytes. With sync, f's
// dirty pages are written back first, so that every extent says where the
// bytes are now: before writeback, a rewritten block of a cloned file
// still maps to the shared block.
func fileExtents(f *os.File, size int64, sync bool) ([]fiemapExtent, error) {
	var out []fiemapExtent
	words := (int(unsafe.Sizeof(fiemapHeader{})) + fiemapBatch*int(unsafe.Sizeof(fiemapExtent{}))) / 8
	buf := make([]uint64, words)
	hdr := (*fiemapHeader)(unsafe.Pointer(&buf[0]))
	ext := unsafe.Slice((*fiemapExtent)(unsafe.Add(unsafe.Pointer(&buf[0]), unsafe.Sizeof(fiemapHeader{}))), fiemapBatch)
	for start := uint64(0); start < uint64(size); {
		*hdr = fiemapHeader{Start: start, Length: uint64(size) - start, Count: fiemapBatch}
		if sync {
			hdr.Flags = fiemapFlagSync
		}
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), fsIocFiemap, uintptr(unsafe.Pointer(&buf[0]))); errno != 0 {
			return nil, fmt.Errorf("fiemap %s: %w", f.Name(), errno)
		}
		n := int(hdr.Mapped)
		if n == 0 {
			break // a hole to the end
		}
		out = append(out, ext[:n]...)
		last := ext[n-1]
		if last.Flags&fiemapExtentLast != 0 {
			break
		}
		if last.Logical+last.Length <= start {
			return nil, fmt.Errorf("fiemap %s: no progress at %d", f.Name(), start)
		}
		start = last.Logical + last.Length
	}
	return out, nil
}

// sharedRanges returns the ranges of a new version of a file (size bytes,
// extents a) that may differ from the old one (oldSize bytes, extents b),
// as extents.Diff does: within their common length, every byte the two do
// not provably share — both in holes, or in the same disk block — and
// every byte past the old end; and the comparePages at offsets dirty,
// whatever their blocks. It fails with extents.ErrTooDifferent when more
// than limit bytes within the common length may differ.
func sharedRanges(a, b []fiemapExtent, size, oldSize, limit int64, dirty []int64) ([]extents.Range, error) {
	common := uint64(min(size, oldSize))
	var pages []int64 // offsets of comparePages that may differ
	var found int64
	for _, p := range dirty {
		if uint64(p) < common {
			pages = append(pages, p)
			found += comparePage
		}
	}
	if found > limit {
		return nil, extents.ErrTooDifferent
	}
	i, j := 0, 0
	for off := uint64(0); off < common; {
		for i < len(a) && a[i].Logical+a[i].Length <= off {
			i++
		}
		for j < len(b) && b[j].Logical+b[j].Length <= off {
			j++
		}
		// The run from off on which neither file's mapping changes.
		end := common
		ea, inA := extentAt(a, i, off, &end)
		eb, inB := extentAt(b, j, off, &end)
		same := !inA && !inB // both holes: zeros
		if inA && inB && (ea.Flags|eb.Flags)&fiemapExtentVague == 0 {
			same = ea.Physical-ea.Logical == eb.Physical-eb.Logical
		}
		if !same {
			for p := off / comparePage * comparePage; p < end; p += comparePage {
				if n := len(pages); n == 0 || pages[n-1] != int64(p) {
					pages = append(pages, int64(p))
				}
			}
			if found += int64(end - off); found > limit {
				return nil, extents.ErrTooDifferent
			}
		}
		off = end
	}
	c := comparer{common: int64(common), pages: pages}
	return c.ranges(size), nil
}

// extentAt returns the extent of es, from index i on, holding byte off,
// if one does, and lowers *end to where that extent, or the hole off is
// in, ends.
func extentAt(es []fiemapExtent, i int, off uint64, end *uint64) (fiemapExtent, bool) {
	if i >= len(es) {
		return fiemapExtent{}, false
	}
	e := es[i]
	if e.Logical > off {
		*end = min(*end, e.Logical)
		return fiemapExtent{}, false
	}
	*end = min(*end, e.Logical+e.Length)
	return e, true
}

// errNoExtents: a file's block map cannot be compared.
var errNoExtents = errors.New("no block map to compare")

// compareExtents returns the ranges of file f (size bytes) that may differ
// from the data file at path, which holds oldSize bytes, by their block
// maps (see sharedRanges); sync writes f's dirty pages back first, which a
// file other processes may have written needs. It fails with errNoExtents
// when the data file cannot be read or the filesystem has no FIEMAP.
func compareExtents(f *os.File, size int64, path string, oldSize, limit int64, sync bool) ([]extents.Range, error) {
	df, err := os.Open(path)
	if err != nil {
		return nil, errors.Join(errNoExtents, err)
	}
	defer df.Close()
	if fi, err := df.Stat(); err != nil || fi.Size() != oldSize {
		return nil, errors.Join(errNoExtents, err)
	}
	// A page written lately may still map to the block it shares with the
	// data file, until writeback moves it: either write f back first
	// (FIEMAP's sync, ~0.8 ms of a 10-byte edit's commit), or count the
	// pages the page cache holds dirty as changed. The latter asks first:
	// on XFS a page it finds clean was never written or has been moved by
	// the time FIEMAP reads the map, since XFS ends a page's writeback
	// after it moves the block (xfs_end_ioend). Other filesystems sync.
	var dirty []int64
	if sync && onXFS(f) {
		d, err := dirtyPages(f, min(size, oldSize), limit) // past the old end, every byte counts as changed anyway
		if errors.Is(err, extents.ErrTooDifferent) {
			return nil, err
		}
		if err == nil {
			dirty, sync = d, false
		}
	}
	a, err := fileExtents(f, size, sync)
	if err != nil {
		return nil, errors.Join(errNoExtents, err)
	}
	b, err := fileExtents(df, oldSize, false) // a data file is never written
	if err != nil {
		return nil, errors.Join(errNoExtents, err)
	}
	return sharedRanges(a, b, size, oldSize, limit, dirty)
}

// onXFS reports whether f is on XFS.
func onXFS(f *os.File) bool {
	var st unix.Statfs_t
	return unix.Fstatfs(int(f.Fd()), &st) == nil && st.Type == unix.XFS_SUPER_MAGIC
}

// dirtyPages returns the offsets of the comparePages of f's first size
// bytes that the page cache holds dirty or under writeback, by halving
// the range wherever cachestat(2) (Linux 6.5) counts some but not all. It
// fails with extents.ErrTooDifferent past limit bytes, and where
// cachestat does.
func dirtyPages(f *os.File, size, limit int64) ([]int64, error) {
	page := max(int64(os.Getpagesize()), comparePage)
	var out []int64
	var find func(off, n int64) error
	find = func(off, n int64) error {
		var cs unix.Cachestat_t
		if err := unix.Cachestat(uint(f.Fd()), &unix.CachestatRange{Off: uint64(off), Len: uint64(n)}, &cs, 0); err != nil {
			return fmt.Errorf("cachestat %s: %w", f.Name(), err)
		}
		switch dirty := int64(cs.Dirty + cs.Writeback); {
		case dirty == 0:
			return nil
		case n <= page || dirty*int64(os.Getpagesize()) >= n:
			// One page, or every page of the range.
			for p := off; p < off+n; p += comparePage {
				out = append(out, p)
			}
			if int64(len(out))*comparePage > limit {
				return extents.ErrTooDifferent
			}
			return nil
		}
		half := (n/2 + page - 1) / page * page
		if err := find(off, half); err != nil {
			return err
		}
		return find(off+half, n-half)
	}
	if size <= 0 {
		return nil, nil
	}
	return out, find(0, (size+page-1)/page*page)
}

// sameBlocks reports whether upper file f and its clone c, both size
// bytes, share every block: then nothing wrote f since c was cloned from
// it, and the two hold the same bytes.
func sameBlocks(f, c *os.File, size int64) (bool, error) {
	a, err := fileExtents(f, size, true)
	if err != nil {
		return false, err
	}
	b, err := fileExtents(c, size, false) // nobody writes a clone
	if err != nil {
		return false, err
	}
	ranges, err := sharedRanges(a, b, size, size, 0, nil)
	if errors.Is(err, extents.ErrTooDifferent) {
		return false, nil
	}
	return err == nil && len(ranges) == 0, err
}
