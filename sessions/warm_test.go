package sessions

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/publish"
	"github.com/layerfs/layerfs/store"
)

// TestWarmPaths: a commit's read-ahead takes the big files it modified,
// except those a data file holds — or will hold, once the one being made
// is done — which it only primes; new files and small ones it leaves.
func TestWarmPaths(t *testing.T) {
	s := store.NewTestStore(t)
	oldID := object.Sum(object.KindChunk, []byte("old"))
	b := s.NewBatch()
	tree, err := b.PutTree(&store.Tree{Entries: []store.Entry{
		{Name: "a.bin", Type: store.TypeFile, Mode: 0o644, Size: 4 << 20, ID: oldID},
		{Name: "b.bin", Type: store.TypeFile, Mode: 0o644, Size: 4 << 20, ID: oldID},
		{Name: "small", Type: store.TypeFile, Mode: 0o644, Size: 10, ID: oldID},
	}})
	if err != nil {
		t.Fatal(err)
	}
	old, err := b.PutCommit(&store.Commit{Tree: tree, Origin: store.OriginInit, Time: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	l, err := openDataLayer(filepath.Join(t.TempDir(), ".data"), 1<<30, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	newA := object.Sum(object.KindChunk, []byte("a, new"))
	newB := object.Sum(object.KindChunk, []byte("b, new"))
	file := func(id object.ID, size int64) *store.Entry {
		return &store.Entry{Type: store.TypeFile, Mode: 0o644, Size: size, ID: id}
	}
	cs := &publish.Changeset{Base: old, Changes: []publish.Change{
		{Path: "a.bin", Entry: file(newA, 4<<20)},
		{Path: "b.bin", Entry: file(newB, 4<<20)},
		{Path: "small", Entry: file(newA, 10)},
		{Path: "fresh.bin", Entry: file(newA, 4<<20)},
	}}

	cached, primed := warmPaths(s, old, cs, l)
	if !slices.Equal(cached, []string{"a.bin", "b.bin"}) || len(primed) != 0 {
		t.Errorf("no data files: cached %v, primed %v; want [a.bin b.bin], []", cached, primed)
	}
	l.mu.Lock()
	l.making[newB] = make(chan struct{})
	l.mu.Unlock()
	cached, primed = warmPaths(s, old, cs, l)
	if !slices.Equal(cached, []string{"a.bin"}) || !slices.Equal(primed, []string{"b.bin"}) {
		t.Errorf("b.bin's data file being made: cached %v, primed %v; want [a.bin], [b.bin]", cached, primed)
	}
}
