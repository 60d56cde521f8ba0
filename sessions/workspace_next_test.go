package sessions

import (
	"io"
	"log"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// testWorkspace is a Workspace record in a fresh state directory, on
// generation gen, with nothing mounted.
func testWorkspace(t *testing.T, gen int) *workspace {
	t.Helper()
	d := &Daemon{cfg: Config{StateDir: t.TempDir()}, log: log.New(io.Discard, "", 0)}
	w := &workspace{d: d, rec: record{ID: "ws-test", Gen: gen}}
	if err := os.MkdirAll(w.dir(), 0o700); err != nil {
		t.Fatal(err)
	}
	return w
}

// TestTrashFreesTheNamesAtOnce: the directories trash removes in the
// background are out of the way at once, and what is made under their
// names before the remover runs stays: it removes them by names of their
// own.
func TestTrashFreesTheNamesAtOnce(t *testing.T) {
	w := testWorkspace(t, 0)
	upper, work := w.genDirs(1)
	for _, p := range []string{filepath.Join(upper, "old"), filepath.Join(work, "work")} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	release := make(chan struct{})
	SetFailpointForTest(FailpointRemove, func() error { <-release; return nil })
	t.Cleanup(func() { SetFailpointForTest(FailpointRemove, nil) })
	w.trash(upper, work, w.dir("missing"))
	if err := w.freshDirs(upper, work); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(upper, "new"), []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	close(release)
	janitor.waitIdle()
	entries, _ := os.ReadDir(w.dir())
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"upper-1", "work-1"}) {
		t.Errorf("left in the Workspace's directory: %v", names)
	}
	if data, err := os.ReadFile(filepath.Join(upper, "new")); string(data) != "new\n" {
		t.Errorf("the new upperdir's file: %q, %v", data, err)
	}
}

// TestRemoveOldGenerations: a restart removes the directories of the
// generations before the current one, and what trash had not removed
// yet, and keeps the current and next generations' and those set aside.
func TestRemoveOldGenerations(t *testing.T) {
	w := testWorkspace(t, 2)
	for _, name := range []string{"upper-0", "upper-1", "work-1", "rebase-1", "upper-1.kept-5", "trash-123/upper-3/f",
		"upper-2", "work-2", "rebase-2", "upper-3"} {
		if err := os.MkdirAll(w.dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w.removeOldGenerations()
	janitor.waitIdle()
	entries, _ := os.ReadDir(w.dir())
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"rebase-2", "upper-1.kept-5", "upper-2", "upper-3", "work-2"}; !slices.Equal(names, want) {
		t.Errorf("left after the restart: %v, want %v", names, want)
	}
}
