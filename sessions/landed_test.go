package sessions

import (
	"os"
	"path/filepath"
	"testing"
)

// TestTopMissing: the path a whiteout hides what the view lacks at is
// the topmost missing one, and none is needed below a file, nor below a
// symlink, which is never followed.
func TestTopMissing(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"d/e", "out"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"d/e/f", "file", "out/x"} {
		if err := os.WriteFile(filepath.Join(root, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("out", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	dirs := map[string]bool{}
	for p, want := range map[string]string{
		"d/e/f": "", "d/e/g": "d/e/g", "d/n/m/o": "d/n", "n/m": "n",
		"file/x": "", "link/y": "", "link": "",
	} {
		got, err := topMissing(root, p, dirs)
		if err != nil || got != want {
			t.Errorf("topMissing(%s) = %q, %v; want %q", p, got, err, want)
		}
	}
}
