package fusefs

import (
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/layerfs/layerfs/lowerfs"
	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// fileSystem is what every node of one mount shares.
type fileSystem struct {
	st      *store.Store
	cache   *lowerfs.Cache
	opts    Options
	log     *log.Logger
	inos    inoTable
	limiter limiter
	started time.Time // the mtime of directories that are not in a tree

	mu      sync.Mutex
	views   map[object.ID]*lowerfs.View // by Commit, for the all-commits root
	slots   map[string]*slotDir         // by name, the Slots not released
	slotSeq uint64                      // the last Slot's name
}

func newFileSystem(st *store.Store, opts Options, logger *log.Logger) *fileSystem {
	return &fileSystem{
		st:      st,
		cache:   lowerfs.NewCache(opts.CacheBytes),
		opts:    opts,
		log:     logger,
		started: time.Now(),
		views:   map[object.ID]*lowerfs.View{},
	}
}

// view returns the View of a Commit, opening it on first use.
func (fsys *fileSystem) view(commit object.ID) (*lowerfs.View, error) {
	fsys.mu.Lock()
	v, ok := fsys.views[commit]
	fsys.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := lowerfs.Open(fsys.st, commit, lowerfs.Options{Cache: fsys.cache, ReadAhead: fsys.opts.ReadAhead})
	if err != nil {
		return nil, fmt.Errorf("view %s: %w", commit.Short(), err)
	}
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	if old, ok := fsys.views[commit]; ok {
		return old, nil
	}
	fsys.views[commit] = v
	return v, nil
}

// dropView forgets v, if it is still the View kept for its Commit; the
// next lookup of the Commit opens a new one.
func (fsys *fileSystem) dropView(v *lowerfs.View) {
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	if fsys.views[v.Commit()] == v {
		delete(fsys.views, v.Commit())
	}
}

// close stops the cache's read-ahead workers.
func (fsys *fileSystem) close() { fsys.cache.Close() }
