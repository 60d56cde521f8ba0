package extents

import (
	"fmt"
	"io"
	"math"
)

// Overwrite writes data at off, as pwrite does: a write past the end first
// extends the file with zero bytes. Writing no bytes changes nothing, even
// past the end. It stores only the chunks and nodes the write changes.
func Overwrite(s Store, f File, off int64, data []byte) (File, error) {
	return overwriteFrom(s, f, off, data, nil)
}

// overwriteFrom is Overwrite reading f's bytes from bytes, when it is not
// nil, rather than through s (see editFrom).
func overwriteFrom(s Store, f File, off int64, data []byte, bytes io.ReaderAt) (File, error) {
	if off < 0 || off > math.MaxInt64-int64(len(data)) {
		return File{}, fmt.Errorf("overwrite %d bytes at %d: %w", len(data), off, ErrInvalid)
	}
	if len(data) == 0 {
		return f, nil
	}
	sp := splice{off: f.Size, zeros: off - f.Size, data: data}
	if off <= f.Size {
		sp = splice{off: off, del: min(int64(len(data)), f.Size-off), data: data}
	}
	g, err := editFrom(s, f, sp, bytes)
	if err != nil {
		return File{}, fmt.Errorf("overwrite %d bytes at %d: %w", len(data), off, err)
	}
	return g, nil
}

// Append writes data at the end of f.
func Append(s Store, f File, data []byte) (File, error) {
	return Overwrite(s, f, f.Size, data)
}

// Truncate cuts f to size bytes, or extends it with zero bytes to size.
func Truncate(s Store, f File, size int64) (File, error) {
	switch {
	case size < 0:
		return File{}, fmt.Errorf("truncate to %d: %w", size, ErrInvalid)
	case size == f.Size:
		return f, nil
	}
	sp := splice{off: f.Size, zeros: size - f.Size}
	if size < f.Size {
		sp = splice{off: size, del: f.Size - size}
	}
	g, err := edit(s, f, sp)
	if err != nil {
		return File{}, fmt.Errorf("truncate to %d: %w", size, err)
	}
	return g, nil
}

// Splice replaces the del bytes of f at off with data: an insertion (del
// 0), a deletion (data empty) or a replacement of another length, in the
// middle of the file or at its end. The bytes after the change keep their
// chunks; it stores only the chunks around the change and the nodes above
// them, as Overwrite does.
func Splice(s Store, f File, off, del int64, data []byte) (File, error) {
	if off < 0 || del < 0 || off > f.Size || del > f.Size-off {
		return File{}, fmt.Errorf("splice %d bytes for %d at %d of %d: %w", len(data), del, off, f.Size, ErrInvalid)
	}
	if del == 0 && len(data) == 0 {
		return f, nil
	}
	g, err := edit(s, f, splice{off: off, del: del, data: data})
	if err != nil {
		return File{}, fmt.Errorf("splice %d bytes for %d at %d: %w", len(data), del, off, err)
	}
	return g, nil
}

// edit applies sp to f: one chunk for a small result, otherwise the changed
// chunks and the nodes above them.
func edit(s Store, f File, sp splice) (File, error) {
	return editFrom(s, f, sp, nil)
}

// editFrom is edit reading f's bytes from bytes, when it is not nil, rather
// than through s (which still serves f's tree).
func editFrom(s Store, f File, sp splice, bytes io.ReaderAt) (File, error) {
	if f.Size < 0 {
		return File{}, fmt.Errorf("file size %d: %w", f.Size, ErrInvalid)
	}
	r := NewReader(s, f)
	size := f.Size + sp.delta()
	if size < SmallFileMax {
		return editSmall(s, content{old: r, bytes: bytes, sp: sp}, size)
	}
	cs, err := rechunk(s, r, content{old: r, bytes: bytes, sp: sp})
	if err != nil {
		return File{}, err
	}
	root, err := spliceLevels(s, r, cs)
	if err != nil {
		return File{}, err
	}
	return File{ID: root, Size: size}, nil
}

// editSmall stores the new content, under SmallFileMax bytes, as one chunk.
func editSmall(s Store, src content, size int64) (File, error) {
	data := make([]byte, size)
	if err := src.readAt(data, 0); err != nil {
		return File{}, err
	}
	old := &oldChunks{cur: newCursor(src.old, 0)}
	if err := old.pullRange(0, size); err != nil {
		return File{}, err
	}
	return writeSmall(s, data, old.base(0, size))
}
