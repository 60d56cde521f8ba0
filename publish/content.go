package publish

import (
	"fmt"
	"io"

	"github.com/layerfs/layerfs/extents"
	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// readAll reads a file entry's whole content. A small file is one chunk,
// returned as g gives it rather than copied once more (blame reads the
// version every write replaces): the bytes may be shared, so callers only
// read them.
func readAll(g extents.Getter, e *store.Entry) ([]byte, error) {
	f := extents.File{ID: e.ID, Size: e.Size}
	if f.Kind() == object.KindChunk {
		data, err := g.Get(e.ID, object.KindChunk)
		if err == nil && int64(len(data)) != e.Size {
			err = fmt.Errorf("chunk %s: %d bytes where %d were expected: %w",
				e.ID.Short(), len(data), e.Size, object.ErrCorrupt)
		}
		return data, err
	}
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
