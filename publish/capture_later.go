package publish

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/extents"
	"github.com/layerfs/layerfs/store"
)

// A 10-byte edit of a big file copied up from its data file is found by
// block maps and read from the upper file itself (patchThenClone); the
// clone that becomes the new version's data file is made after the
// Commit lands, off the commit's path (Clone.Make). Cloning first, so as
// to read a copy nothing can write, cost the commit ~1.2 ms: the clone
// writes the file's dirty pages back and remaps it, and its pages then
// had to be read from disk.
//
// What the clone holds is checked before it becomes a data file, since
// the upper file may have been written after capture read it: every
// block of the clone that it does not share with the old version's data
// file must lie in the ranges capture read, and hold the bytes capture
// read there. A block the two files share holds the same bytes in both,
// and outside those ranges the content capture stored is the old one;
// so then the clone holds exactly that content.

// laterMax is the most capture reads of a file whose data file it makes
// after the commit: it keeps a copy of those bytes until then. (Past the
// old version's end, as when a big file grows, the changed ranges are
// not bounded by patchLimit.)
const laterMax = 16 << 20

// recorder is an io.ReaderAt that keeps a copy of what it read.
type recorder struct {
	r     io.ReaderAt
	reads []readRange
}

type readRange struct {
	off  int64
	data []byte
}

func (rr *recorder) ReadAt(p []byte, off int64) (int, error) {
	n, err := rr.r.ReadAt(p, off)
	if n > 0 {
		rr.reads = append(rr.reads, readRange{off, bytes.Clone(p[:n])})
	}
	return n, err
}

// later is a data file to make once the Commit lands: a clone of src.
type later struct {
	src      *os.File // the upper file, its own descriptor
	size     int64    // the content's size
	base     string   // the old version's data file
	baseSize int64
	reads    []readRange // what capture read of src
}

// patchThenClone stores upper file f (size bytes), copied up from the
// data file of lower, as lower patched where their block maps differ,
// reading those ranges from f; the new version's data file is left for
// Clone.Make. It reports false, with no error, when block maps cannot
// tell (no data file, or f differs too much): then the caller clones
// first.
func (cw *capturer) patchThenClone(f *os.File, size int64, lower *store.Entry) (extents.File, bool, error) {
	data := cw.data.DataFile(lower.ID)
	if data == "" || lower.Size < extents.SmallFileMax {
		return extents.File{}, false, nil
	}
	old := extents.File{ID: lower.ID, Size: lower.Size}
	ranges, err := compareExtents(f, size, data, old.Size, min(size/8, patchLimit), true)
	if err != nil {
		return extents.File{}, false, nil
	}
	var n int64
	for _, r := range ranges {
		n += r.Len
	}
	if n > laterMax {
		return extents.File{}, false, nil // too much to keep a copy of: clone first
	}
	rec := &recorder{r: f}
	content, err := cw.applyRanges(rec, size, old, ranges)
	if err != nil {
		return extents.File{}, false, err
	}
	if content == old {
		return content, true, nil // copied up, not changed: no new data file
	}
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0) // no command may inherit it
	if err != nil {
		return content, true, nil // no data file: copy-ups read FUSE
	}
	cw.cap.Clones = append(cw.cap.Clones, Clone{ID: content.ID, later: &later{
		src: os.NewFile(uintptr(fd), f.Name()), size: size, base: data, baseSize: old.Size, reads: rec.reads}})
	return content, true, nil
}

// Later says the clone is still to make (Make), and Tmp is empty.
func (c Clone) Later() bool { return c.later != nil }

// Make clones the upper file of a Clone still to make into dl and checks
// that the clone holds exactly content c.ID (see patchThenClone). It
// returns the clone's path, or an error, and closes the upper file either
// way.
func (c Clone) Make(dl DataLayer) (string, error) {
	l := c.later
	defer l.src.Close()
	tmp, err := dl.Clone(l.src)
	if err != nil {
		return "", err
	}
	if err := l.check(tmp); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("data file of %s: %w", c.ID.Short(), err)
	}
	return tmp, nil
}

// Release closes the upper file of a Clone still to make, which will not
// be made.
func (c Clone) Release() {
	if c.later != nil {
		c.later.src.Close()
	}
}

// errCloneDiffers: the upper file was written after capture read it.
var errCloneDiffers = fmt.Errorf("the file changed after it was captured")

// check reports whether the clone at path holds the content capture
// stored.
func (l *later) check(path string) error {
	c, err := os.Open(path)
	if err != nil {
		return err
	}
	defer c.Close()
	fi, err := c.Stat()
	if err != nil {
		return err
	}
	if fi.Size() != l.size {
		return errCloneDiffers
	}
	differ, err := compareExtents(c, l.size, l.base, l.baseSize, l.size, false) // nobody writes a clone
	if err != nil {
		return err
	}
	for _, r := range differ {
		if !l.covered(r) {
			return errCloneDiffers
		}
	}
	for _, rd := range l.reads {
		buf := make([]byte, len(rd.data))
		if _, err := c.ReadAt(buf, rd.off); err != nil {
			return err
		}
		if !bytes.Equal(buf, rd.data) {
			return errCloneDiffers
		}
	}
	return nil
}

// covered reports whether capture read every byte of r.
func (l *later) covered(r extents.Range) bool {
	off := r.Off
	for off < r.End() {
		advanced := false
		for _, rd := range l.reads {
			if rd.off <= off && off < rd.off+int64(len(rd.data)) {
				off = rd.off + int64(len(rd.data))
				advanced = true
			}
		}
		if !advanced {
			return false
		}
	}
	return true
}
