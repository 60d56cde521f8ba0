package extents

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/layerfs/layerfs/object"
)

// Check verifies that f is well formed and canonical, exactly what Write
// makes of its content: every node decodes, has the level and size its
// parent gives it and ends where the node boundary rule says, and every
// chunk has its entry's length and ends where the chunker would cut. It
// reads every object of f once; problems wrap object.ErrCorrupt.
func Check(s Getter, f File) error {
	c := checker{r: NewReader(s, f), nodes: map[nodeKey]bool{}, chunks: map[object.ID]bool{}}
	if f.Size < 0 {
		return fmt.Errorf("check file of size %d: %w", f.Size, ErrInvalid)
	}
	if f.small() {
		_, err := c.chunkData(Extent{Len: f.Size, Chunk: f.ID})
		return err
	}
	return c.node(f.ID, anyLevel, f.Size, true)
}

type checker struct {
	r      *Reader
	nodes  map[nodeKey]bool   // checked nodes
	chunks map[object.ID]bool // checked chunks: whether each ends at a real cut
}

type nodeKey struct {
	id        object.ID
	rightmost bool
}

// node checks node id and what it lists. rightmost says the node is the
// last of its level, the one node that may end without a boundary.
func (c *checker) node(id object.ID, level int, size int64, rightmost bool) error {
	if c.nodes[nodeKey{id, rightmost}] {
		return nil
	}
	n, err := c.r.node(id, level, size)
	if err != nil {
		return err
	}
	if err := checkCuts(n, level == anyLevel, rightmost); err != nil {
		return fmt.Errorf("extent node %s: %w", id.Short(), err)
	}
	for i, e := range n.Entries {
		last := rightmost && i == len(n.Entries)-1
		if n.Level > 0 {
			err = c.node(e.ID, n.Level-1, e.Len, last)
		} else {
			err = c.chunk(e, last)
		}
		if err != nil {
			return err
		}
	}
	c.nodes[nodeKey{id, rightmost}] = true
	return nil
}

// checkCuts checks that n ends where the node boundary rule says, and
// nowhere before.
func checkCuts(n *node, root, rightmost bool) error {
	last := len(n.Entries) - 1
	for i, e := range n.Entries[:last] {
		if endsNode(i+1, e.ID) {
			return fmt.Errorf("node goes on past a boundary after entry %d: %w", i, object.ErrCorrupt)
		}
	}
	if !rightmost && !endsNode(last+1, n.Entries[last].ID) {
		return fmt.Errorf("node ends without a boundary: %w", object.ErrCorrupt)
	}
	if root && n.Level > 0 && last == 0 {
		return fmt.Errorf("root node has one entry: %w", object.ErrCorrupt)
	}
	return nil
}

// chunk checks the chunk of leaf entry e; last says it ends the file.
func (c *checker) chunk(e Entry, last bool) error {
	cut, ok := c.chunks[e.ID]
	if !ok {
		data, err := c.chunkData(Extent{Len: e.Len, Chunk: e.ID})
		if err != nil {
			return err
		}
		if cut, err = oneChunk(data); err != nil {
			return fmt.Errorf("chunk %s: %w", e.ID.Short(), err)
		}
		c.chunks[e.ID] = cut
	}
	if !last && !cut {
		return fmt.Errorf("chunk %s ends where the chunker would not cut: %w", e.ID.Short(), object.ErrCorrupt)
	}
	return nil
}

func (c *checker) chunkData(e Extent) ([]byte, error) {
	data, err := c.r.chunk(e)
	if err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	return data, nil
}

// oneChunk checks that the chunker finds no cut inside data, and reports
// whether it cuts at its end.
func oneChunk(data []byte) (bool, error) {
	n, cut := 0, false
	err := cutChunks(bytes.NewReader(data), func(_ []byte, c bool) error {
		n, cut = n+1, c
		return nil
	})
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	if n != 1 {
		return false, fmt.Errorf("chunker cuts it in %d: %w", n, object.ErrCorrupt)
	}
	return cut, nil
}
