package bench

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/layerfs/layerfs"
	"github.com/layerfs/layerfs/store"
)

// The Go-tree fixture: Go's own source tree ($(go env GOROOT), ~15k files)
// captured by layerfs init into a Store under $BENCH_WORK (default
// /var/tmp). It is built once and kept between runs, keyed by the tree and
// the Store format, because init takes a while; benchmarks that write get
// a private copy of it in b.TempDir(), so the kept one never changes.
//
// Remove $BENCH_WORK/layerfs-bench-cache to rebuild it.

var goTree struct {
	once sync.Once
	path string
	err  error
}

// goTreeStore returns the path of the kept Go-tree Store, building it on
// first use.
func goTreeStore(b *testing.B) string {
	b.Helper()
	goTree.once.Do(func() { goTree.path, goTree.err = buildGoTree() })
	if goTree.err != nil {
		b.Fatal(goTree.err)
	}
	return goTree.path
}

func buildGoTree() (string, error) {
	src, err := benchTree()
	if err != nil {
		return "", err
	}
	key := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%s\x00%d", src, runtime.Version(), store.FormatVersion)))
	dir := filepath.Join(benchDir(), "layerfs-bench-cache")
	path := filepath.Join(dir, "gotree-"+hex.EncodeToString(key[:6])+".layerfs")
	if usable(path) {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp := fmt.Sprintf("%s.building.%d", path, os.Getpid()) // concurrent runs must not share it
	os.Remove(tmp)
	st, err := layerfs.Open(tmp, layerfs.Options{Create: true, Durability: store.Fast})
	if err != nil {
		return "", err
	}
	res, err := st.Init(src, layerfs.InitOptions{})
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("init %s: %w", src, err)
	}
	fmt.Fprintf(os.Stderr, "bench: captured %s (%d files, %d bytes) in %v into %s\n",
		src, res.Files, res.Bytes, res.Duration.Round(1e6), path)
	os.Remove(tmp + "-wal") // SQLite may leave these behind, empty
	os.Remove(tmp + "-shm")
	return path, os.Rename(tmp, path)
}

// benchTree is $BENCH_TREE, or Go's own tree.
func benchTree() (string, error) {
	if env := os.Getenv("BENCH_TREE"); env != "" {
		return env, nil
	}
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOROOT: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// copyGoTree makes a private, writable copy of the Go-tree Store.
func copyGoTree(b *testing.B) string {
	b.Helper()
	dst := filepath.Join(b.TempDir(), "gotree.layerfs")
	if err := copyFile(goTreeStore(b), dst); err != nil {
		b.Fatal(err)
	}
	return dst
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// usable reports whether a kept Store opens (the format may have moved on).
func usable(path string) bool {
	st, err := layerfs.Open(path, layerfs.Options{ReadOnly: true})
	if err != nil {
		return false
	}
	_, err = st.Backend().Branch("main")
	st.Close()
	return err == nil
}
