package extents

import (
	"bytes"
	"fmt"
	"io"

	"github.com/layerfs/layerfs/object"
)

// Write stores the content read from r until io.EOF and returns its File.
// It reads a large file once, keeping a chunk at a time in memory.
func Write(s Store, r io.Reader) (File, error) {
	head, err := io.ReadAll(io.LimitReader(r, SmallFileMax))
	if err != nil {
		return File{}, fmt.Errorf("write file: %w", err)
	}
	if len(head) < SmallFileMax {
		return writeSmall(s, head, object.Zero)
	}
	return writeLarge(s, io.MultiReader(bytes.NewReader(head), r))
}

// WriteBytes stores b and returns its File. The Store may keep b's chunks
// but never b itself, so the caller may reuse b.
func WriteBytes(s Store, b []byte) (File, error) {
	if len(b) < SmallFileMax {
		return writeSmall(s, bytes.Clone(b), object.Zero)
	}
	return writeLarge(s, bytes.NewReader(b))
}

// writeSmall stores data, which the Store may keep, as a one-chunk file.
func writeSmall(s Store, data []byte, base object.ID) (File, error) {
	if data == nil {
		data = []byte{}
	}
	id, err := s.PutChunk(data, base)
	if err != nil {
		return File{}, fmt.Errorf("write file: put chunk: %w", err)
	}
	return File{ID: id, Size: int64(len(data))}, nil
}

// writeLarge chunks r, which holds at least SmallFileMax bytes, and builds
// its tree.
func writeLarge(s Store, r io.Reader) (File, error) {
	var leaves []Entry
	var size int64
	err := cutChunks(r, func(data []byte, _ bool) error {
		id, err := s.PutChunk(bytes.Clone(data), object.Zero)
		if err != nil {
			return fmt.Errorf("put chunk: %w", err)
		}
		leaves = append(leaves, Entry{Len: int64(len(data)), ID: id})
		size += int64(len(data))
		return nil
	})
	if err != nil {
		return File{}, fmt.Errorf("write file: %w", err)
	}
	root, err := buildTree(s, 0, leaves)
	if err != nil {
		return File{}, fmt.Errorf("write file: %w", err)
	}
	return File{ID: root, Size: size}, nil
}
