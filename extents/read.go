package extents

import (
	"fmt"
	"io"
	"iter"
	"sync"

	"github.com/layerfs/layerfs/object"
)

// Extent is one chunk of a file: Len bytes at offset Off held by Chunk.
type Extent struct {
	Off   int64
	Len   int64
	Chunk object.ID
}

// End is the offset just past the extent.
func (e Extent) End() int64 { return e.Off + e.Len }

// Reader reads a File. It keeps the nodes it decodes and the last chunk it
// read, so reads near each other cost a binary search per tree level and a
// copy. It is safe for concurrent use.
type Reader struct {
	loader
	f File

	mu       sync.Mutex // guards lastID and lastData
	lastID   object.ID
	lastData []byte
}

// NewReader returns a Reader of f's content in s.
func NewReader(s Getter, f File) *Reader {
	return &Reader{loader: loader{s: s}, f: f}
}

// Size is the length of the file.
func (r *Reader) Size() int64 { return r.f.Size }

// ReadAt reads len(p) bytes at off, as io.ReaderAt does: it returns io.EOF
// with fewer bytes when the file ends first, and at or after the end.
func (r *Reader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || r.f.Size < 0 {
		return 0, fmt.Errorf("read at %d: %w", off, ErrInvalid)
	}
	n := 0
	for n < len(p) && off < r.f.Size {
		e, err := r.extentAt(off)
		if err != nil {
			return n, fmt.Errorf("read at %d: %w", off, err)
		}
		data, err := r.chunk(e)
		if err != nil {
			return n, fmt.Errorf("read at %d: %w", off, err)
		}
		c := copy(p[n:], data[off-e.Off:])
		n += c
		off += int64(c)
	}
	if n < len(p) || len(p) == 0 && off >= r.f.Size {
		return n, io.EOF
	}
	return n, nil
}

// Extents yields, in order, the extents of the chunks that hold any of the
// n bytes at off (each whole, so the first may start before off), for
// callers that fetch or prefetch chunks themselves.
func (r *Reader) Extents(off, n int64) iter.Seq2[Extent, error] {
	return func(yield func(Extent, error) bool) {
		if off < 0 || n < 0 {
			yield(Extent{}, fmt.Errorf("extents at %d+%d: %w", off, n, ErrInvalid))
			return
		}
		end := r.f.Size
		if n < end-off {
			end = off + n
		}
		if off < end && r.f.small() {
			yield(Extent{Len: r.f.Size, Chunk: r.f.ID}, nil)
			return
		}
		for pos := off; pos < end; {
			n, i, start, err := r.leafAt(pos)
			if err != nil {
				yield(Extent{}, fmt.Errorf("extents at %d: %w", pos, err))
				return
			}
			// The rest of the leaf's entries follow without descending
			// from the root again.
			for ; i < len(n.Entries) && pos < end; i++ {
				e := n.extent(i, start)
				if !yield(e, nil) {
					return
				}
				pos = e.End()
			}
		}
	}
}

// extentAt descends the tree to the chunk holding offset off < f.Size.
func (r *Reader) extentAt(off int64) (Extent, error) {
	if r.f.small() {
		return Extent{Len: r.f.Size, Chunk: r.f.ID}, nil
	}
	n, i, start, err := r.leafAt(off)
	if err != nil {
		return Extent{}, err
	}
	return n.extent(i, start), nil
}

// extent is leaf entry i as an Extent, the leaf starting at file offset
// start.
func (n *node) extent(i int, start int64) Extent {
	return Extent{Off: start + n.startOf(i), Len: n.Entries[i].Len, Chunk: n.Entries[i].ID}
}

// leafAt descends the tree of a file that is not small to the leaf holding
// offset off < f.Size, and returns it, the index of the entry holding off
// and the file offset of the leaf's first byte.
func (r *Reader) leafAt(off int64) (*node, int, int64, error) {
	id, level, start, size := r.f.ID, anyLevel, int64(0), r.f.Size
	for {
		n, err := r.node(id, level, size)
		if err != nil {
			return nil, 0, 0, err
		}
		i := n.find(off - start)
		if n.Level == 0 {
			return n, i, start, nil
		}
		start += n.startOf(i)
		id, level, size = n.Entries[i].ID, n.Level-1, n.Entries[i].Len
	}
}

// chunk returns e's bytes, from the last chunk read when it is the same.
func (r *Reader) chunk(e Extent) ([]byte, error) {
	r.mu.Lock()
	if r.lastData != nil && r.lastID == e.Chunk {
		data := r.lastData
		r.mu.Unlock()
		return data, nil
	}
	r.mu.Unlock()
	data, err := r.s.Get(e.Chunk, object.KindChunk)
	if err != nil {
		return nil, fmt.Errorf("get chunk %s: %w", e.Chunk.Short(), err)
	}
	if int64(len(data)) != e.Len {
		return nil, fmt.Errorf("chunk %s: %d bytes where %d were expected: %w",
			e.Chunk.Short(), len(data), e.Len, object.ErrCorrupt)
	}
	r.mu.Lock()
	r.lastID, r.lastData = e.Chunk, data
	r.mu.Unlock()
	return data, nil
}
