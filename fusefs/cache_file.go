package fusefs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/layerfs/layerfs/object"
)

// cacheChunk is how many bytes CacheFile hands the kernel at a time.
const cacheChunk = 1 << 20

// CacheFile puts the content of path in commit into the kernel's page
// cache for this mount, as if it had been read, without a FUSE request per
// read: the bytes come from the Store (verified, as Read's) and go to the
// kernel with a notify-store message per MiB. The Workspace daemon uses it
// for the new version of a big file a commit modified, which the next
// command's overlayfs copy-up would otherwise read through FUSE. It needs
// a mount of all Commits (Options.AllCommits).
func (s *Server) CacheFile(commit object.ID, path string) error {
	if _, ok := s.root.(*commitsRoot); !ok {
		return fmt.Errorf("cache %s: not a mount of all Commits", path)
	}
	// Looking the path up through the mount makes the kernel, and so
	// go-fuse, know each node on it.
	if _, err := os.Lstat(filepath.Join(s.mnt, commit.String(), filepath.FromSlash(path))); err != nil {
		return fmt.Errorf("cache %s: %w", path, err)
	}
	n := s.root.EmbeddedInode().GetChild(commit.String())
	for _, name := range strings.Split(path, "/") {
		if n == nil {
			break
		}
		n = n.GetChild(name)
	}
	if n == nil {
		return fmt.Errorf("cache %s: the kernel forgot it", path)
	}
	fn, ok := n.Operations().(*fileNode)
	if !ok {
		return fmt.Errorf("cache %s: not a file", path)
	}
	f, err := fn.file()
	if err != nil {
		return fmt.Errorf("cache %s: %w", path, err)
	}
	buf := make([]byte, cacheChunk)
	for off := int64(0); off < fn.e.Size; off += cacheChunk {
		k, err := f.ReadAt(buf, off)
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("cache %s: %w", path, err)
		}
		if errno := n.WriteCache(off, buf[:k]); errno != 0 {
			return fmt.Errorf("cache %s at %d: %w", path, off, errno)
		}
	}
	return nil
}
