package extents

import (
	"fmt"
	"io"
)

// splice describes an edit as the content it makes:
//
//	old[:off] ++ zeros × 0 ++ data ++ old[off+del:]
//
// Every edit either keeps the file's size (an overwrite inside it) or
// changes only its end, so the bytes after the change keep their offsets
// whenever there are any.
type splice struct {
	off, del int64
	zeros    int64
	data     []byte
}

func (sp splice) insLen() int64 { return sp.zeros + int64(len(sp.data)) }

// delta is how much the edit grows the file.
func (sp splice) delta() int64 { return sp.insLen() - sp.del }

// content reads the bytes a splice makes of an old file: old's bytes from
// bytes, when it is set, and through the Store otherwise.
type content struct {
	old   *Reader
	bytes io.ReaderAt
	sp    splice
}

// readAt fills p with the new content at pos; p must not reach past its end.
func (c *content) readAt(p []byte, pos int64) error {
	for len(p) > 0 {
		n, err := c.readSegment(p, pos)
		if err != nil {
			return err
		}
		p, pos = p[n:], pos+int64(n)
	}
	return nil
}

// readSegment reads the start of p from the one segment holding pos.
func (c *content) readSegment(p []byte, pos int64) (int, error) {
	sp := c.sp
	switch {
	case pos < sp.off:
		return c.readOld(p[:min(int64(len(p)), sp.off-pos)], pos)
	case pos < sp.off+sp.zeros:
		return len(clear0(p[:min(int64(len(p)), sp.off+sp.zeros-pos)])), nil
	case pos < sp.off+sp.insLen():
		return copy(p, sp.data[pos-sp.off-sp.zeros:]), nil
	default:
		return c.readOld(p, pos-sp.delta())
	}
}

func (c *content) readOld(p []byte, off int64) (int, error) {
	var n int
	var err error
	if c.bytes != nil {
		n, err = c.bytes.ReadAt(p, off)
	} else {
		n, err = c.old.ReadAt(p, off)
	}
	if n < len(p) {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return n, fmt.Errorf("read old content: %w", err)
	}
	return n, nil
}

func clear0(p []byte) []byte {
	clear(p)
	return p
}

// window is an io.Reader of the new content from pos to end.
type window struct {
	c        *content
	pos, end int64
}

func (w *window) Read(p []byte) (int, error) {
	if w.pos >= w.end {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), w.end-w.pos)]
	if err := w.c.readAt(p, w.pos); err != nil {
		return 0, err
	}
	w.pos += int64(len(p))
	return len(p), nil
}
