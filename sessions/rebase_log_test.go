package sessions

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/internal/ovl"
)

// TestRebaseLogUndo interrupts a rebase's changes to an upperdir after
// each number of steps, as a crash would, and undoes them from the log
// on disk, as a restart does, twice (a crash can cut an undo short too):
// the upperdir is as it was, every time. Made in full, the steps give
// the rebased upperdir.
func TestRebaseLogUndo(t *testing.T) {
	root := os.Geteuid() == 0 // trusted.* xattrs, for the opaque step
	errStop := errors.New("stopped")
	for stop := 0; ; stop++ {
		upper, l := rebaseLogFixture(t, root)
		want := snapshot(t, upper)
		reached := 0
		SetFailpointForTest(FailpointRebaseStep, func() error {
			if reached++; reached > stop {
				return errStop
			}
			return nil
		})
		err := l.apply(upper, t.Logf)
		SetFailpointForTest(FailpointRebaseStep, nil)
		if err == nil {
			if stop != len(l.Steps) {
				t.Fatalf("all %d steps made at %d", len(l.Steps), stop)
			}
			checkRebased(t, upper, root)
		} else if !errors.Is(err, errStop) {
			t.Fatalf("after %d steps: %v", stop, err)
		}
		for range 2 {
			loaded, err := loadRebaseLog(l.dir)
			if err != nil || loaded == nil {
				t.Fatalf("load the log: %v, %v", loaded, err)
			}
			if err := loaded.undo(upper); err != nil {
				t.Fatalf("undo after %d steps: %v", stop, err)
			}
			if got := snapshot(t, upper); !maps.Equal(got, want) {
				t.Fatalf("undone after %d steps:\n%v\nwant\n%v", stop, got, want)
			}
		}
		if err == nil {
			return
		}
	}
}

// rebaseLogFixture makes an upperdir and the saved log of a rebase of it
// with a step of every kind.
func rebaseLogFixture(t *testing.T, root bool) (string, *rebaseLog) {
	dir := t.TempDir()
	upper := filepath.Join(dir, "upper-0")
	for p, data := range map[string]string{"conflict.txt": "ours\n", "unchanged.txt": "u\n", "gone/sub/x": "x\n", "keep/y": "y\n"} {
		full := filepath.Join(upper, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(upper, "renamed"), 0o755); err != nil {
		t.Fatal(err)
	}
	if root {
		if err := unix.Lsetxattr(filepath.Join(upper, "renamed"), ovl.Redirect, []byte("/old"), 0); err != nil {
			t.Fatal(err)
		}
	}
	l := &rebaseLog{Gen: 0, dir: filepath.Join(dir, "rebase-0")}
	if err := os.Mkdir(l.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(p string, had bool, data string) {
		i := l.add(rebaseStep{Op: stepWrite, Path: p, Had: had})
		if err := stageUpper(filepath.Join(upper, p), l.staged(i), p, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	write("conflict.txt", true, "<<<<<<< markers\n")
	l.add(rebaseStep{Op: stepMkdir, Path: "new"})
	write("new/merged.txt", false, "merged\n")
	l.add(rebaseStep{Op: stepRemove, Path: "unchanged.txt"})
	l.add(rebaseStep{Op: stepRemove, Path: "gone/sub"})
	l.add(rebaseStep{Op: stepRemoveEmpty, Path: "gone"})
	l.add(rebaseStep{Op: stepRemoveEmpty, Path: "keep"}) // not empty: stays
	if root {
		l.add(rebaseStep{Op: stepOpaque, Path: "renamed", Redirect: "/old"})
	}
	if err := l.save(); err != nil {
		t.Fatal(err)
	}
	return upper, l
}

// checkRebased checks the upperdir of rebaseLogFixture once every step is
// made.
func checkRebased(t *testing.T, upper string, root bool) {
	t.Helper()
	want := map[string]string{
		".":              "dir 755",
		"conflict.txt":   "file 640 <<<<<<< markers\n",
		"keep":           "dir 755",
		"keep/y":         "file 640 y\n",
		"new":            "dir 755",
		"new/merged.txt": "file 644 merged\n",
		"renamed":        "dir 755",
	}
	if root {
		want["renamed"] += " opaque=y"
	}
	if got := snapshot(t, upper); !maps.Equal(got, want) {
		t.Errorf("rebased:\n%v\nwant\n%v", got, want)
	}
}

// snapshot describes every entry below dir: type, permissions, content
// and overlay xattrs.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		desc := fmt.Sprintf("file %o ", fi.Mode().Perm())
		if d.IsDir() {
			desc = fmt.Sprintf("dir %o", fi.Mode().Perm())
		} else {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += string(data)
		}
		for _, x := range []string{ovl.Redirect, ovl.Opaque} {
			if v, _ := ovl.Get(p, x); v != "" {
				desc += fmt.Sprintf(" %s=%s", filepath.Ext(x)[1:], v)
			}
		}
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRebaseLogUndoFailedKeeps: a failed rebase whose undo fails at a
// step keeps what the rebase moved out of the upperdir — here the
// Workspace's own version of a conflicting file — aside, named in the
// error, with no log left to undo it again; it removed the log's
// directory, and that version with it.
func TestRebaseLogUndoFailedKeeps(t *testing.T) {
	upper, l := rebaseLogFixture(t, false)
	if err := l.apply(upper, t.Logf); err != nil {
		t.Fatal(err)
	}
	// conflict.txt cannot come back: a non-empty directory is there now.
	conflict := filepath.Join(upper, "conflict.txt")
	if err := os.Remove(conflict); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(conflict, "in"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := l.undoFailed(upper)
	if err == nil {
		t.Fatal("undo succeeded")
	}
	asides, _ := filepath.Glob(l.dir + ".kept-*")
	if len(asides) != 1 || !strings.Contains(err.Error(), asides[0]) {
		t.Fatalf("kept aside: %q; error: %v", asides, err)
	}
	if data, rerr := os.ReadFile(filepath.Join(asides[0], "kept-0")); rerr != nil || string(data) != "ours\n" {
		t.Fatalf("the Workspace's version: %q, %v", data, rerr)
	}
	if l, lerr := loadRebaseLog(asides[0]); l != nil || lerr != nil {
		t.Fatalf("a log left to undo again: %v, %v", l, lerr)
	}
	if _, serr := os.Stat(l.dir); !errors.Is(serr, fs.ErrNotExist) {
		t.Fatalf("the log's directory: %v", serr)
	}
	// The other steps were undone.
	if data, rerr := os.ReadFile(filepath.Join(upper, "unchanged.txt")); rerr != nil || string(data) != "u\n" {
		t.Fatalf("unchanged.txt: %q, %v", data, rerr)
	}
}
