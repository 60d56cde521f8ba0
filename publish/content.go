package publish

import (
	"io"

	"github.com/layerfs/layerfs/extents"
	"github.com/layerfs/layerfs/store"
)

// readAll reads a file entry's whole content.
func readAll(g extents.Getter, e *store.Entry) ([]byte, error) {
	data := make([]byte, e.Size)
	n, err := extents.NewReader(g, extents.File{ID: e.ID, Size: e.Size}).ReadAt(data, 0)
	if err == io.EOF && int64(n) == e.Size {
		err = nil
	}
	return data, err
}

// isText is git's test: no NUL byte in the first 8000 bytes.
func isText(data []byte) bool {
	for _, b := range data[:min(len(data), 8000)] {
		if b == 0 {
			return false
		}
	}
	return true
}
