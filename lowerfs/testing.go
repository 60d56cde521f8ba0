package lowerfs

import (
	"errors"
	"path"
	"sort"
	"strings"
	"testing"

	"github.com/layerfs/layerfs/extents"
	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// TestEntry describes one path of a tree built by WriteTestCommit.
type TestEntry struct {
	Data     string // a file's content
	Dir      bool   // an (empty unless other paths are below it) directory
	Target   string // when set, a symlink to Target
	Mode     uint32 // permission bits; 0 means 0644, 0755 (dirs) or 0777 (symlinks)
	UID, GID uint32
	MTime    int64 // ns since the epoch; 0 means TestMTime
}

// TestMTime is the mtime WriteTestCommit gives entries that name none.
const TestMTime = int64(1_700_000_000_123_456_789)

// WriteTestCommit stores a Commit whose tree holds entries, keyed by slash
// path (missing parent directories are made), and returns its ID.
func WriteTestCommit(t testing.TB, s *store.Store, entries map[string]TestEntry, parents ...object.ID) object.ID {
	t.Helper()
	b := s.NewBatch()
	root, err := putTestTree(b, "", entries)
	var id object.ID
	if err == nil {
		id, err = b.PutCommit(&store.Commit{Tree: root, Parents: parents, Origin: "operation:test", Message: "test", Time: TestMTime})
	}
	if ferr := b.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		t.Fatalf("write test commit: %v", err)
	}
	return id
}

// SetTestBranch points branch at commit, creating it if needed.
func SetTestBranch(t testing.TB, s *store.Store, branch string, commit object.ID) {
	t.Helper()
	err := s.Update(func(tx *store.RefTx) error {
		old, err := tx.Head(branch)
		if errors.Is(err, store.ErrNotFound) {
			return tx.CreateBranch(branch, commit, "test")
		}
		if err != nil {
			return err
		}
		return tx.SetHead(branch, old, commit)
	})
	if err != nil {
		t.Fatalf("set branch %s: %v", branch, err)
	}
}

// putTestTree stores the directory dir (a slash path, "" for the root).
func putTestTree(b *store.Batch, dir string, entries map[string]TestEntry) (object.ID, error) {
	var tree store.Tree
	for _, name := range testChildren(dir, entries) {
		p := path.Join(dir, name)
		te, ok := entries[p]
		if !ok {
			te = TestEntry{Dir: true}
		}
		e, err := putTestEntry(b, p, te, entries)
		if err != nil {
			return object.Zero, err
		}
		e.Name = name
		tree.Entries = append(tree.Entries, e)
	}
	return b.PutTree(&tree)
}

func putTestEntry(b *store.Batch, p string, te TestEntry, entries map[string]TestEntry) (store.Entry, error) {
	e := store.Entry{Mode: te.Mode, UID: te.UID, GID: te.GID, MTime: te.MTime}
	if e.MTime == 0 {
		e.MTime = TestMTime
	}
	var err error
	switch {
	case te.Target != "":
		e.Type, e.Target, e.Size = store.TypeSymlink, te.Target, int64(len(te.Target))
		e.Mode = defaultMode(e.Mode, 0777)
	case te.Dir || hasChildren(p, entries):
		e.Type, e.Mode = store.TypeDir, defaultMode(e.Mode, 0755)
		e.ID, err = putTestTree(b, p, entries)
	default:
		e.Type, e.Mode = store.TypeFile, defaultMode(e.Mode, 0644)
		var f extents.File
		f, err = extents.WriteBytes(b, []byte(te.Data))
		e.ID, e.Size = f.ID, f.Size
	}
	return e, err
}

func defaultMode(m, def uint32) uint32 {
	if m == 0 {
		return def
	}
	return m
}

// testChildren lists the names directly below dir that entries mention.
func testChildren(dir string, entries map[string]TestEntry) []string {
	seen := map[string]bool{}
	for p := range entries {
		rest, ok := strings.CutPrefix(p, dir+"/")
		if dir == "" {
			rest, ok = p, true
		}
		if ok && rest != "" {
			name, _, _ := strings.Cut(rest, "/")
			seen[name] = true
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func hasChildren(dir string, entries map[string]TestEntry) bool {
	for p := range entries {
		if strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	return false
}
