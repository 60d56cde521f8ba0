package lowerfs

import (
	"fmt"

	"github.com/layerfs/layerfs/extents"
	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// File reads one file's content. Reads may run concurrently; sequential
// ones are read ahead (see the package documentation).
type File struct {
	v    *View
	name string
	size int64
	r    *extents.Reader
	ra   readAhead
}

// OpenFile returns a File for a file entry. It reads nothing yet.
func (v *View) OpenFile(e store.Entry) (*File, error) {
	switch e.Type {
	case store.TypeFile:
	case store.TypeDir:
		return nil, fmt.Errorf("open %q: %w", e.Name, ErrIsDir)
	default:
		return nil, fmt.Errorf("open %q: a %s: %w", e.Name, e.Type, ErrInvalid)
	}
	f := extents.File{ID: e.ID, Size: e.Size}
	return &File{v: v, name: e.Name, size: e.Size, r: extents.NewReader(v.g, f)}, nil
}

// Size is the file's length in bytes.
func (f *File) Size() int64 { return f.size }

// ReadAt reads len(p) bytes at off, as io.ReaderAt does: fewer bytes and
// io.EOF when the file ends first.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("read %q at %d: %w", f.name, off, ErrInvalid)
	}
	if f.size >= extents.SmallFileMax && off < f.size && len(p) > 0 {
		f.prefetch(off, int64(len(p)))
	}
	n, err := f.r.ReadAt(p, off)
	if err != nil && n < len(p) && off+int64(n) < f.size {
		return n, fmt.Errorf("read %q: %w", f.name, err)
	}
	return n, err
}

// Slices returns the bytes of [off, off+n), cut short at the end of the
// file, as slices of the cached chunks themselves: nothing is copied, so a
// caller that writes them out with writev (as fusefs does) saves a copy of
// every byte. The slices must not be modified, and stay valid until the
// caller calls release, which it must do once, when done with them (the
// chunks' buffers are then recycled: see chunk). At or past the end of
// the file there are none.
func (f *File) Slices(off, n int64) (slices [][]byte, release func(), err error) {
	if off < 0 || n < 0 {
		return nil, nil, fmt.Errorf("read %q at %d+%d: %w", f.name, off, n, ErrInvalid)
	}
	end := min(off+n, f.size)
	if off >= end {
		return nil, func() {}, nil
	}
	if f.size >= extents.SmallFileMax {
		f.prefetch(off, end-off)
	}
	var exts []extents.Extent
	for e, err := range f.r.Extents(off, end-off) {
		if err != nil {
			return nil, nil, fmt.Errorf("read %q: %w", f.name, err)
		}
		exts = append(exts, e)
	}
	f.load(exts)
	held := make([]*chunk, 0, len(exts))
	release = func() {
		for _, ch := range held {
			ch.release()
		}
	}
	slices = make([][]byte, 0, len(exts))
	for _, e := range exts {
		ch, err := f.chunk(e)
		if err != nil {
			release()
			return nil, nil, fmt.Errorf("read %q at %d: %w", f.name, e.Off, err)
		}
		held = append(held, ch)
		slices = append(slices, ch.data[max(off, e.Off)-e.Off:min(end, e.End())-e.Off])
	}
	return slices, release, nil
}

// load reads those of the extents' chunks that are neither cached nor on
// their way, in one batch: the first chunk of a read (prefetch leaves it
// to the reader) and any that read-ahead skipped. A query per chunk would
// cost about twice as much.
func (f *File) load(exts []extents.Extent) {
	ids := make([]object.ID, len(exts))
	for i, e := range exts {
		ids[i] = e.Chunk
	}
	if todo, loads := f.v.g.c.claim(ids); len(todo) > 0 {
		f.v.g.loadClaimed(todo, loads, object.KindChunk)
	}
}

// chunk returns an extent's chunk, held, checked against its length.
func (f *File) chunk(e extents.Extent) (*chunk, error) {
	ch, err := f.v.g.chunk(e.Chunk)
	if err != nil {
		return nil, err
	}
	if int64(len(ch.data)) != e.Len {
		n := len(ch.data)
		ch.release()
		return nil, &ObjectError{Kind: object.KindChunk, ID: e.Chunk,
			Err: fmt.Errorf("%d bytes where %d were expected: %w", n, e.Len, object.ErrCorrupt)}
	}
	return ch, nil
}

// prefetch hands the chunks of the read-ahead window, and those of this
// read past its first chunk, to the Cache's workers.
func (f *File) prefetch(off, n int64) {
	from, to := f.ra.advance(off, n, f.v.readAhead)
	if to <= from {
		return
	}
	c := f.v.g.c
	var batch []object.ID
	for e, err := range f.r.Extents(from, to-from) {
		if err != nil {
			break // the read itself reports it
		}
		if e.Off <= off && off < e.End() {
			continue // the reader loads the chunk it starts in
		}
		if batch = append(batch, e.Chunk); len(batch) == prefetchBatch {
			c.pre.add(f.v.g, batch, object.KindChunk)
			batch = nil
		}
	}
	if len(batch) > 0 {
		c.pre.add(f.v.g, batch, object.KindChunk)
	}
}
