package extents

import (
	"github.com/layerfs/layerfs/object"
)

// cursor walks the entries of one level of a file's tree, left to right,
// across node boundaries. Edits use it to re-read the old entries around a
// change. A small file reads as one leaf holding its single chunk.
type cursor struct {
	r     *Reader
	level int
	path  []frame // the root first, a node at level last
	done  bool    // past the last entry
}

// frame is a node on the cursor's path and the entry the path goes through.
type frame struct {
	n     *node
	i     int
	start int64 // file offset of the node's first byte
	id    object.ID
}

func newCursor(r *Reader, level int) *cursor {
	return &cursor{r: r, level: level}
}

// root returns the file's root node, a synthetic leaf for a small file.
func (c *cursor) root() (*node, error) {
	f := c.r.f
	if f.small() {
		return newNode(Node{Entries: []Entry{{Len: f.Size, ID: f.ID}}}), nil
	}
	return c.r.node(f.ID, anyLevel, f.Size)
}

// seek moves to the entry holding offset x; x at or past the end of the
// file puts the cursor past the last entry.
func (c *cursor) seek(x int64) error {
	c.path, c.done = c.path[:0], x >= c.r.f.Size
	if c.done {
		return nil
	}
	n, err := c.root()
	if err != nil {
		return err
	}
	id, start := c.r.f.ID, int64(0)
	for {
		i := n.find(x - start)
		c.path = append(c.path, frame{n: n, i: i, start: start, id: id})
		if n.Level <= c.level {
			return nil
		}
		e := n.Entries[i]
		start += n.startOf(i)
		id = e.ID
		if n, err = c.r.node(id, n.Level-1, e.Len); err != nil {
			return err
		}
	}
}

func (c *cursor) top() *frame { return &c.path[len(c.path)-1] }

// entry returns the current entry and its file offset.
func (c *cursor) entry() (Entry, int64) {
	t := c.top()
	return t.n.Entries[t.i], t.start + t.n.startOf(t.i)
}

// offset is the file offset of the current entry, or the file size when
// the cursor is done.
func (c *cursor) offset() int64 {
	if c.done {
		return c.r.f.Size
	}
	_, off := c.entry()
	return off
}

// atNodeStart reports whether the current entry begins a node, so that the
// cursor's offset is a node boundary of this level.
func (c *cursor) atNodeStart() bool { return c.done || c.top().i == 0 }

// nodeSpan returns the ID, offset and size of the node holding the current
// entry.
func (c *cursor) nodeSpan() (object.ID, int64, int64) {
	t := c.top()
	return t.id, t.start, t.n.size()
}

// next moves to the following entry, climbing to the nearest ancestor with
// a next entry and descending along first entries to the cursor's level.
func (c *cursor) next() error {
	for len(c.path) > 0 {
		t := c.top()
		if t.i+1 < len(t.n.Entries) {
			t.i++
			return c.descend()
		}
		c.path = c.path[:len(c.path)-1]
	}
	c.done = true
	return nil
}

// descend extends the path along first entries down to the cursor's level.
func (c *cursor) descend() error {
	for {
		t := c.top()
		if t.n.Level <= c.level {
			return nil
		}
		e := t.n.Entries[t.i]
		start := t.start + t.n.startOf(t.i)
		n, err := c.r.node(e.ID, t.n.Level-1, e.Len)
		if err != nil {
			return err
		}
		c.path = append(c.path, frame{n: n, start: start, id: e.ID})
	}
}
