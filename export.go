package layerfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/extents"
	"github.com/layerfs/layerfs/internal/longpath"
	"github.com/layerfs/layerfs/store"
)

// ExportOptions control Export.
type ExportOptions struct {
	// Path exports only this directory or file of the tree; "" is the root.
	Path string
	// Workers writing files in parallel; default GOMAXPROCS.
	Workers int
}

// ExportResult says what Export wrote.
type ExportResult struct {
	Files, Dirs, Symlinks int
	Bytes                 int64
	Duration              time.Duration
}

// ErrNotEmpty: Export's target directory already has entries.
var ErrNotEmpty = errors.New("target directory is not empty")

// Export materializes the tree a ref names into dir, which must be missing
// or empty: contents, modes, mtimes, symlinks, and owners when run as root.
func (st *Store) Export(ref, dir string, opts ExportOptions) (*ExportResult, error) {
	start := time.Now()
	root, _, err := st.s.CommitRoot(ref)
	if err != nil {
		return nil, fmt.Errorf("export %s: %w", ref, err)
	}
	e, err := st.s.Lookup(root, opts.Path)
	if err != nil {
		return nil, fmt.Errorf("export %s: %w", ref, err)
	}
	if err := prepareTarget(dir); err != nil {
		return nil, fmt.Errorf("export %s: %w", ref, err)
	}
	x := newExporter(st.s, opts.Workers)
	if e.Type == store.TypeDir {
		x.dir(e.ID, dir)
		if p := path.Clean("/" + opts.Path); p != "/" {
			// A directory's own mode, times and owner, as its
			// children have theirs (a commit's root has none stored).
			x.dirs = append(x.dirs, dirMeta{e, dir})
		}
	} else {
		e.Name = filepath.Base(opts.Path)
		x.entry(&e, filepath.Join(dir, e.Name))
	}
	if err := x.finish(); err != nil {
		return nil, fmt.Errorf("export %s to %s: %w", ref, dir, err)
	}
	x.res.Duration = time.Since(start)
	return &x.res, nil
}

func prepareTarget(dir string) error {
	if dir == "" {
		return fmt.Errorf("no target directory: %w", store.ErrBadPath)
	}
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		return fmt.Errorf("target %s is not a directory: %w", dir, store.ErrBadPath)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if names, _ := f.Readdirnames(1); len(names) > 0 {
		return fmt.Errorf("%s: %w", dir, ErrNotEmpty)
	}
	return nil
}

// exporter writes files on a pool of workers and applies directory
// metadata last, deepest first, so writing children does not disturb a
// parent's mtime.
type exporter struct {
	s      *store.Store
	jobs   chan fileJob
	wg     sync.WaitGroup
	mu     sync.Mutex
	err    error
	dirs   []dirMeta
	owners bool
	res    ExportResult
}

type fileJob struct {
	e    store.Entry
	path string
}

type dirMeta struct {
	e    store.Entry
	path string
}

func newExporter(s *store.Store, workers int) *exporter {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	x := &exporter{s: s, jobs: make(chan fileJob, 64), owners: os.Geteuid() == 0}
	for i := 0; i < workers; i++ {
		x.wg.Add(1)
		go x.worker()
	}
	return x
}

func (x *exporter) fail(err error) {
	if err == nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.err == nil {
		x.err = err
	}
}

func (x *exporter) failed() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.err != nil
}

func (x *exporter) dir(id [32]byte, path string) {
	t, err := x.s.Tree(id)
	if err != nil {
		x.fail(fmt.Errorf("%s: %w", path, err))
		return
	}
	for i := range t.Entries {
		if x.failed() {
			return
		}
		e := &t.Entries[i]
		x.entry(e, filepath.Join(path, e.Name))
	}
}

func (x *exporter) entry(e *store.Entry, path string) {
	switch e.Type {
	case store.TypeDir:
		if err := inDir(path, "mkdir", func(dir int, name string) error { return unix.Mkdirat(dir, name, 0o700) }); err != nil {
			x.fail(err)
			return
		}
		x.res.Dirs++
		x.dir(e.ID, path)
		x.dirs = append(x.dirs, dirMeta{*e, path})
	case store.TypeSymlink:
		if err := inDir(path, "symlink", func(dir int, name string) error { return unix.Symlinkat(e.Target, dir, name) }); err != nil {
			x.fail(err)
			return
		}
		x.res.Symlinks++
		x.fail(x.meta(e, path))
	case store.TypeFile:
		x.res.Files++
		x.res.Bytes += e.Size
		x.jobs <- fileJob{*e, path}
	}
}

func (x *exporter) worker() {
	defer x.wg.Done()
	for j := range x.jobs {
		if x.failed() {
			continue
		}
		if err := x.writeFile(&j.e, j.path); err != nil {
			x.fail(fmt.Errorf("%s: %w", j.path, err))
		}
	}
}

func (x *exporter) writeFile(e *store.Entry, path string) error {
	f, err := openLong(path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	r := extents.NewReader(x.s, extents.File{ID: e.ID, Size: e.Size})
	_, err = io.Copy(&sparseWriter{f: f}, io.NewSectionReader(r, 0, e.Size))
	if err == nil {
		err = f.Truncate(e.Size) // the size, holes at the end included
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return x.meta(e, path)
}

// meta applies owner, mode and mtime, in that order: chown clears setuid.
func (x *exporter) meta(e *store.Entry, path string) error {
	return inDir(path, "set metadata of", func(dir int, name string) error {
		if x.owners {
			if err := unix.Fchownat(dir, name, int(e.UID), int(e.GID), unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return err
			}
		}
		if e.Type != store.TypeSymlink {
			if err := unix.Fchmodat(dir, name, e.Mode&07777, 0); err != nil {
				return err
			}
		}
		ts := []unix.Timespec{unix.NsecToTimespec(e.MTime), unix.NsecToTimespec(e.MTime)}
		return unix.UtimesNanoAt(dir, name, ts, unix.AT_SYMLINK_NOFOLLOW)
	})
}

// inDir, openLong and openLongDir reach paths of any length: see
// internal/longpath.
func inDir(path, what string, op func(dir int, name string) error) error {
	return longpath.At(path, what, op)
}

func openLong(path string, flags int, perm uint32) (*os.File, error) {
	return longpath.Open(path, flags, perm)
}

func openLongDir(path string) (int, error) { return longpath.OpenDir(path) }

func (x *exporter) finish() error {
	close(x.jobs)
	x.wg.Wait()
	for i := range x.dirs { // children before parents
		if x.failed() {
			break
		}
		x.fail(x.meta(&x.dirs[i].e, x.dirs[i].path))
	}
	return x.err
}

// holeBlock is the unit sparseWriter leaves out when it is all zeros.
const holeBlock = 4096

// sparseWriter writes a file from its start, leaving whole blocks of
// zeros as holes, so that a sparse file exports sparse (a 30 MiB file of
// mostly zeros had taken 30 MiB). The caller truncates the file to its
// size at the end. Non-zero runs go out in one write each.
type sparseWriter struct {
	f   *os.File
	off int64
}

func (w *sparseWriter) Write(p []byte) (int, error) {
	n := len(p)
	start := 0 // of the run not yet written
	for i := 0; i < len(p); {
		// The block holding file offset off+i, cut by p's end.
		end := min(len(p), i+int(holeBlock-(w.off+int64(i))%holeBlock))
		if end-i == holeBlock && allZero(p[i:end]) {
			if err := w.flush(p[start:i], start); err != nil {
				return 0, err
			}
			start = end
		}
		i = end
	}
	if err := w.flush(p[start:], start); err != nil {
		return 0, err
	}
	w.off += int64(n)
	return n, nil
}

// flush writes run, which starts at p[at].
func (w *sparseWriter) flush(run []byte, at int) error {
	if len(run) == 0 {
		return nil
	}
	_, err := w.f.WriteAt(run, w.off+int64(at))
	return err
}

var zeroBlock [holeBlock]byte

func allZero(b []byte) bool { return bytes.Equal(b, zeroBlock[:len(b)]) }
