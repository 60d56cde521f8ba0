package layerfs

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/extents"
	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// InitOptions control Init.
type InitOptions struct {
	// Message for main's first commit; default "init <dir>".
	Message string
	// Progress, when set, is called a few times a second while files are
	// saved, and once at the end.
	Progress func(Progress)
	// Workers saving files in parallel; default GOMAXPROCS.
	Workers int
}

// Progress reports how far Init has come.
type Progress struct {
	Files, TotalFiles int64
	Bytes, TotalBytes int64
	Elapsed           time.Duration
	Done              bool
}

// InitResult says what Init captured.
type InitResult struct {
	Commit   object.ID
	Layer    string
	Files    int
	Dirs     int
	Symlinks int
	Bytes    int64
	// Skipped lists fifos, sockets and device files, which are not captured.
	Skipped []string
	// Excluded lists the Store's own files, when dir holds them: they
	// change as init writes them.
	Excluded []string
	Objects  store.BatchStats
	Duration time.Duration
}

// ErrInitialized: init into a Store that already has a main branch.
var ErrInitialized = errors.New("store already has a main branch")

// Init captures dir completely — sources, .git, dependencies, every ignored
// file, symlinks (never followed), empty dirs, modes, mtimes, owners — as
// main's first Commit and Layer. Hard links become separate files. Hashing,
// chunking and compression run on all cores.
func (st *Store) Init(dir string, opts InitOptions) (*InitResult, error) {
	start := time.Now()
	if _, err := st.s.Branch(store.MainBranch); err == nil {
		return nil, fmt.Errorf("init %s: %w", dir, ErrInitialized)
	}
	sc, err := scanTree(dir, st.s.Path())
	if err != nil {
		return nil, fmt.Errorf("init %s: %w", dir, err)
	}
	b := st.s.NewBatch()
	if err := saveFiles(b, sc, opts, start); err != nil {
		b.Flush()
		return nil, fmt.Errorf("init %s: %w", dir, err)
	}
	root, err := putTrees(b, sc.root)
	if err == nil {
		err = b.Flush()
	} else {
		b.Flush()
	}
	if err != nil {
		return nil, fmt.Errorf("init %s: %w", dir, err)
	}
	msg := opts.Message
	if msg == "" {
		msg = "init " + dir
	}
	c := &store.Commit{Tree: root, Origin: store.OriginInit, Message: msg, Time: time.Now().UnixNano()}
	var commit object.ID
	err = st.s.Update(func(tx *store.RefTx) error {
		commit = tx.Put(object.KindCommit, c.Encode())
		return tx.CreateBranch(store.MainBranch, commit, "init")
	})
	if err != nil {
		return nil, fmt.Errorf("init %s: %w", dir, err)
	}
	return &InitResult{
		Commit: commit, Layer: "L000001",
		Files: len(sc.files), Dirs: sc.dirs, Symlinks: sc.links, Bytes: sc.bytes,
		Skipped: sc.skipped, Excluded: sc.excluded, Objects: b.Stats(), Duration: time.Since(start),
	}, nil
}

// saveFiles chunks, hashes, compresses and stores every scanned file on a
// pool of workers.
func saveFiles(b *store.Batch, sc *scan, opts InitOptions, start time.Time) error {
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var files, bytes atomic.Int64
	stop := reportProgress(opts.Progress, sc, &files, &bytes, start)
	defer stop()
	jobs := make(chan *scanEntry)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range jobs {
				if err := saveFile(b, e); err != nil {
					errs <- err
					for range jobs {
					}
					return
				}
				files.Add(1)
				bytes.Add(e.Size)
			}
		}()
	}
	for _, e := range sc.files {
		jobs <- e
	}
	close(jobs)
	wg.Wait()
	close(errs)
	return <-errs
}

func saveFile(b *store.Batch, e *scanEntry) error {
	f, err := openLong(e.abs, unix.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var r io.Reader = f
	if e.Size < extents.SmallFileMax {
		data, err := io.ReadAll(f)
		if err != nil {
			return fmt.Errorf("read %s: %w", e.abs, err)
		}
		file, err := extents.WriteBytes(b, data)
		e.ID, e.Size = file.ID, file.Size
		return err
	}
	file, err := extents.Write(b, r)
	if err != nil {
		return fmt.Errorf("save %s: %w", e.abs, err)
	}
	e.ID, e.Size = file.ID, file.Size
	return nil
}

// reportProgress calls fn every 200 ms until the returned stop is called,
// then once more with Done set.
func reportProgress(fn func(Progress), sc *scan, files, bytes *atomic.Int64, start time.Time) func() {
	if fn == nil {
		return func() {}
	}
	report := func(done bool) {
		fn(Progress{Files: files.Load(), TotalFiles: int64(len(sc.files)), Bytes: bytes.Load(),
			TotalBytes: sc.bytes, Elapsed: time.Since(start), Done: done})
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				report(false)
			}
		}
	}()
	return func() { close(quit); wg.Wait(); report(true) }
}
