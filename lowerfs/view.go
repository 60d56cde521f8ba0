package lowerfs

import (
	"fmt"

	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// Read-ahead bounds, in bytes past the end of a sequential read.
const (
	// DefaultReadAhead is the largest read-ahead window when Options
	// leaves it unset.
	DefaultReadAhead = 8 << 20
	// minReadAhead is the window after the first sequential read.
	minReadAhead = 256 << 10
)

// Options control a View.
type Options struct {
	// Cache holds decoded objects. Views of one Store should share one;
	// nil gives the View a private Cache of DefaultCacheBytes.
	Cache *Cache
	// ReadAhead is the largest window, in bytes, prefetched past a
	// sequential reader. 0 means DefaultReadAhead; negative disables
	// read-ahead (reads of several chunks are still parallel).
	ReadAhead int64
}

// View is a read-only view of one tree: a Commit's, usually. Everything it
// returns is immutable. It is safe for concurrent use.
type View struct {
	g         *getter
	commit    object.ID
	root      store.Entry
	readAhead int64
}

// Open returns a View of a Commit's tree. It reads the Commit object and
// nothing else.
func Open(s Store, commit object.ID, opts Options) (*View, error) {
	v := newView(s, opts)
	c, err := v.g.commit(commit)
	if err != nil {
		return nil, fmt.Errorf("open commit %s: %w", commit.Short(), err)
	}
	v.commit = commit
	v.root = store.RootEntry(c.Tree)
	v.root.MTime = c.Time
	return v, nil
}

// OpenTree returns a View of a tree that belongs to no Commit. It reads
// nothing until used.
func OpenTree(s Store, tree object.ID, opts Options) *View {
	v := newView(s, opts)
	v.root = store.RootEntry(tree)
	return v
}

func newView(s Store, opts Options) *View {
	c := opts.Cache
	if c == nil {
		c = NewCache(DefaultCacheBytes)
	}
	ra := opts.ReadAhead
	if ra == 0 {
		ra = DefaultReadAhead
	}
	return &View{g: &getter{s: s, c: c}, readAhead: max(ra, 0)}
}

// Commit is the Commit the View shows; zero for OpenTree.
func (v *View) Commit() object.ID { return v.commit }

// Root is the root directory's entry. It has no name; its mode is 0755 and
// its mtime the Commit's time.
func (v *View) Root() store.Entry { return v.root }

// Cache is the Cache the View loads through.
func (v *View) Cache() *Cache { return v.g.c }
