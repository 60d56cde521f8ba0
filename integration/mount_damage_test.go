package integration

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/layerfs/layerfs/extents"
	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// TestMountCorruptChunkIsEIO corrupts one chunk of a file in the Store
// file: reading the range holding it fails with EIO and the server logs the
// object and the path, while the rest of the file, other files and the
// server itself keep working.
func TestMountCorruptChunkIsEIO(t *testing.T) {
	src := t.TempDir()
	big := randomBytes(7, 1<<20)
	writeTree(t, src, map[string]string{"data/big.bin": string(big), "good.txt": "still fine\n"})
	storePath := initStore(t, src)
	chunk, chunkOff := chunkOf(t, storePath, "data/big.bin", 600<<10)
	store.CorruptObject(t, storePath, chunk)

	logPath := filepath.Join(t.TempDir(), "server.log")
	mnt := mountStore(t, storePath, "--log", logPath, "main")
	bigPath := filepath.Join(mnt, "data", "big.bin")
	if _, err := os.ReadFile(bigPath); !errors.Is(err, syscall.EIO) {
		t.Errorf("read of the damaged file: %v, want EIO", err)
	}
	f, err := os.Open(bigPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	if _, err := f.ReadAt(buf, chunkOff); !errors.Is(err, syscall.EIO) {
		t.Errorf("read of the damaged chunk: %v, want EIO", err)
	}
	if n, err := f.ReadAt(buf, 0); err != nil || string(buf[:n]) != string(big[:n]) {
		t.Errorf("read of an intact range of the damaged file: %d, %v", n, err)
	}
	for i := 0; i < 3; i++ {
		if got := readString(t, filepath.Join(mnt, "good.txt")); got != "still fine\n" {
			t.Errorf("other file: %q", got)
		}
	}
	if !layerfsMounted(mnt) {
		t.Fatal("the server is gone")
	}
	logged, _ := os.ReadFile(logPath)
	if !strings.Contains(string(logged), chunk.String()) || !strings.Contains(string(logged), "/data/big.bin") {
		t.Errorf("the log does not name the chunk %s and the path:\n%s", chunk, logged)
	}
}

// chunkOf returns the chunk holding offset off of a file in main's tree,
// and the chunk's offset.
func chunkOf(t *testing.T, storePath, path string, off int64) (object.ID, int64) {
	t.Helper()
	s, err := store.Open(storePath, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	root, _, err := s.CommitRoot(store.MainBranch)
	if err != nil {
		t.Fatal(err)
	}
	e, err := s.Lookup(root, path)
	if err != nil {
		t.Fatal(err)
	}
	for ext, err := range extents.NewReader(s, extents.File{ID: e.ID, Size: e.Size}).Extents(off, 1) {
		if err != nil {
			t.Fatal(err)
		}
		return ext.Chunk, ext.Off
	}
	t.Fatalf("no chunk at %d of %s", off, path)
	return object.Zero, 0
}
