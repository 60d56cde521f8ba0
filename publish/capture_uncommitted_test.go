package publish

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/store"
)

// CaptureUncommitted finds what CaptureUpper leaves out — ignored paths
// and special files — and reads no file to do it. A plain directory
// stands in for the upperdir: without overlayfs's xattrs it is all
// new and changed entries.
func TestCaptureUncommitted(t *testing.T) {
	r := newRepo(t, map[string]string{"a.txt": "a\n", "lib/b.go": "package lib\n"})
	dir := t.TempDir()
	for p, data := range map[string]string{"a.txt": "changed\n", "new.txt": "new\n", "build/out.o": "obj\n", "lib/c.o": "obj\n", "lib/c.go": "package lib\n"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mkfifo(filepath.Join(dir, "lib", "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	u := Upper{Dir: dir, Base: r.head(), Ignore: ParseRules("build/\n*.o\n")}
	full, err := CaptureUpperDry(r.s, u)
	if err != nil {
		t.Fatal(err)
	}
	out, err := CaptureUncommitted(r.s, u)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"build", "lib/c.o"}; !slices.Equal(full.Ignored, want) || !slices.Equal(out.Ignored, want) {
		t.Errorf("ignored: capture %v, uncommitted %v; want %v", full.Ignored, out.Ignored, want)
	}
	if want := []string{"lib/pipe"}; !slices.Equal(full.Skipped, want) || !slices.Equal(out.Skipped, want) {
		t.Errorf("skipped: capture %v, uncommitted %v; want %v", full.Skipped, out.Skipped, want)
	}
	if full.BytesHashed == 0 || out.BytesHashed != 0 {
		t.Errorf("bytes hashed: capture %d, uncommitted %d; want some, none", full.BytesHashed, out.BytesHashed)
	}
}

// A FIFO in place of a lower file or directory: a commit takes the lower
// entry's removal and leaves the FIFO out (Skipped, for the Workspace to
// keep); a discard drops both, since the removal is a change.
func TestCaptureSpecialReplacesLower(t *testing.T) {
	r := newRepo(t, map[string]string{"a.txt": "a\n", "d/x": "x\n", "b.txt": "b\n"})
	dir := t.TempDir()
	for _, p := range []string{"a.txt", "d", "new"} {
		if err := unix.Mkfifo(filepath.Join(dir, p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	u := Upper{Dir: dir, Base: r.head()}
	full, err := CaptureUpperDry(r.s, u)
	if err != nil {
		t.Fatal(err)
	}
	var deleted []string
	for _, c := range full.Changes.Changes {
		if c.Entry != nil {
			t.Errorf("change %s puts an entry there: %+v", c.Path, c.Entry)
		}
		deleted = append(deleted, c.Path)
	}
	slices.Sort(deleted)
	if want := []string{"a.txt", "d"}; !slices.Equal(deleted, want) {
		t.Errorf("deleted %v, want %v", deleted, want)
	}
	slices.Sort(full.Skipped)
	if want := []string{"a.txt", "d", "new"}; !slices.Equal(full.Skipped, want) {
		t.Errorf("skipped %v, want %v", full.Skipped, want)
	}
	out, err := CaptureUncommitted(r.s, u)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"new"}; !slices.Equal(out.Skipped, want) {
		t.Errorf("uncommitted: skipped %v, want %v", out.Skipped, want)
	}
}

// An entry gone between the read of its directory and its lstat or open
// (a file a command or an editor made and removed meanwhile) is not
// there to take: capture goes on without it, rather than fail the commit.
func TestCaptureEntryVanished(t *testing.T) {
	r := newRepo(t, map[string]string{"a.txt": "a\n"})
	dir := t.TempDir()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	c, err := r.s.Commit(r.head())
	if err != nil {
		t.Fatal(err)
	}
	lower, err := r.s.Lookup(c.Tree, "a.txt")
	if err != nil {
		t.Fatal(err)
	}
	cw := &capturer{s: r.s, root: c.Tree, content: hashOnly{r.s}, cap: &Capture{Changes: &Changeset{Base: r.head()}}}
	for _, p := range []string{"gone", "a.txt"} {
		var le *store.Entry
		if p == "a.txt" {
			le = &lower
		}
		if err := cw.entry(d, p, p, le); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if len(cw.cap.Changes.Changes) != 0 {
		t.Errorf("changes %+v, want none", cw.cap.Changes.Changes)
	}
}
