package integration

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/layerfs/layerfs/lowerfs"
	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// commitStore is a Store this test process writes Commits and branches
// into while mount servers read it.
type commitStore struct {
	path string
	s    *store.Store
}

func newCommitStore(t *testing.T) *commitStore {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.layerfs")
	s, err := store.Open(path, store.Options{Create: true, Durability: store.Fast})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &commitStore{path: path, s: s}
}

// commit writes a Commit of one file, f, holding content, and points main
// at it.
func (c *commitStore) commit(t *testing.T, content string, parents ...object.ID) object.ID {
	t.Helper()
	id := lowerfs.WriteTestCommit(t, c.s, map[string]lowerfs.TestEntry{
		"f": {Data: content}, "shared/lib.go": {Data: "package lib\n"},
	}, parents...)
	lowerfs.SetTestBranch(t, c.s, store.MainBranch, id)
	return id
}

func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestMountCommitsSideBySide serves two Commits from one all-commits
// mount: each shows its own content, and a branch link follows the head.
func TestMountCommitsSideBySide(t *testing.T) {
	cs := newCommitStore(t)
	c1 := cs.commit(t, "one")
	c2 := cs.commit(t, "two", c1)
	mnt := mountStore(t, cs.path, "--all-commits", "-o", "branch_timeout=100ms")
	if a, b := readString(t, filepath.Join(mnt, c1.String(), "f")), readString(t, filepath.Join(mnt, c2.String(), "f")); a != "one" || b != "two" {
		t.Errorf("side by side: %q and %q", a, b)
	}
	if got := readString(t, filepath.Join(mnt, "branches", "main", "f")); got != "two" {
		t.Errorf("branches/main/f = %q", got)
	}
	if got := readString(t, filepath.Join(mnt, c1.String()[:12], "f")); got != "one" {
		t.Errorf("through a prefix: %q", got)
	}
	c3 := cs.commit(t, "three", c2)
	if got := readString(t, filepath.Join(mnt, c3.String(), "f")); got != "three" {
		t.Errorf("a Commit made after the mount: %q", got)
	}
	time.Sleep(200 * time.Millisecond)
	if got := readString(t, filepath.Join(mnt, "branches", "main", "f")); got != "three" {
		t.Errorf("branches/main after it moved: %q", got)
	}
	if a := readString(t, filepath.Join(mnt, c1.String(), "f")); a != "one" {
		t.Errorf("an old Commit changed: %q", a)
	}
}

// TestMountIsPinned mounts a branch, then commits to it: the mount keeps
// showing the Commit it was made from, listings included.
func TestMountIsPinned(t *testing.T) {
	cs := newCommitStore(t)
	c1 := cs.commit(t, "before")
	mnt := mountStore(t, cs.path, "main")
	all := mountStore(t, cs.path, "--all-commits")
	pinned := filepath.Join(all, c1.String())
	before, _ := os.ReadDir(mnt)
	lowerfs.SetTestBranch(t, cs.s, store.MainBranch, lowerfs.WriteTestCommit(t, cs.s, map[string]lowerfs.TestEntry{
		"f": {Data: "after"}, "new": {Data: "new"},
	}, c1))
	for _, dir := range []string{mnt, pinned} {
		if got := readString(t, filepath.Join(dir, "f")); got != "before" {
			t.Errorf("%s/f = %q after a later commit", dir, got)
		}
		if _, err := os.Stat(filepath.Join(dir, "new")); !os.IsNotExist(err) {
			t.Errorf("%s shows a later commit's file: %v", dir, err)
		}
	}
	after, _ := os.ReadDir(mnt)
	if len(after) != len(before) {
		t.Errorf("listing changed from %d to %d entries", len(before), len(after))
	}
}
