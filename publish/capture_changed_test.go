package publish

import (
	"bytes"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCaptureFileChangedWhileRead: a file that a command or an editor
// changes after capture took its size, while capture reads it, fails the
// capture with ErrChanged naming the file — not with the short read's
// EOF, an internal error, nor by storing a version the file never held.
// A file left alone between the stat and the read is captured.
func TestCaptureFileChangedWhileRead(t *testing.T) {
	old := make([]byte, 3<<20)
	rand.New(rand.NewSource(3)).Read(old)
	edited := bytes.Clone(old)
	copy(edited[1<<20:], "an edit")
	cases := []struct {
		name   string
		path   string
		upper  []byte
		change func(f *os.File) error // nil: none
	}{
		{"big file shrinks", "big.bin", edited, func(f *os.File) error { return f.Truncate(1 << 20) }},
		{"big file grows", "big.bin", edited, func(f *os.File) error {
			_, err := f.WriteAt([]byte("more"), int64(len(edited)))
			return err
		}},
		{"big file rewritten in place", "big.bin", edited, func(f *os.File) error {
			_, err := f.WriteAt([]byte("elsewhere"), 2<<20)
			return err
		}},
		{"new file grows", "new.txt", []byte("new\n"), func(f *os.File) error {
			_, err := f.WriteAt([]byte("and more\n"), 4)
			return err
		}},
		{"new big file shrinks", "new.bin", old, func(f *os.File) error { return f.Truncate(200 << 10) }},
		{"big file left alone", "big.bin", edited, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRepo(t, map[string]string{"big.bin": string(old)})
			dir := t.TempDir()
			p := filepath.Join(dir, c.path)
			if err := os.WriteFile(p, c.upper, 0o644); err != nil {
				t.Fatal(err)
			}
			changed := 0
			SetAfterStatForTest(func(path string) {
				if path != c.path || c.change == nil {
					return
				}
				f, err := os.OpenFile(p, os.O_WRONLY, 0)
				if err == nil {
					err = errors.Join(c.change(f), f.Close())
				}
				if err != nil {
					t.Errorf("change %s: %v", path, err)
				}
				changed++
			})
			t.Cleanup(func() { SetAfterStatForTest(nil) })
			got, err := CaptureUpper(r.s, Upper{Dir: dir, Base: r.head()})
			if c.change == nil {
				if err != nil || len(got.Changes.Changes) != 1 {
					t.Fatalf("capture: %+v, %v; want the one change", got, err)
				}
				return
			}
			if changed != 1 {
				t.Fatalf("the file was changed %d times, want once", changed)
			}
			if !errors.Is(err, ErrChanged) || !strings.Contains(err.Error(), c.path+": ") {
				t.Fatalf("capture: %v; want %v naming %s", err, ErrChanged, c.path)
			}
		})
	}
}

// A dry capture (what is pending?) takes a file that grew while it was
// read, as it read it: it is never published. One that shrank, whose
// read came up short, is ErrChanged there too, not an internal error.
func TestCaptureDryFileChangedWhileRead(t *testing.T) {
	old := make([]byte, 3<<20)
	rand.New(rand.NewSource(4)).Read(old)
	r := newRepo(t, map[string]string{"big.bin": string(old)})
	dir := t.TempDir()
	p := filepath.Join(dir, "big.bin")
	edited := bytes.Clone(old)
	copy(edited[1<<20:], "an edit")
	for _, size := range []int64{int64(len(old)) + 10, 1 << 20} {
		if err := os.WriteFile(p, edited, 0o644); err != nil {
			t.Fatal(err)
		}
		SetAfterStatForTest(func(path string) {
			if err := os.Truncate(p, size); err != nil {
				t.Error(err)
			}
		})
		t.Cleanup(func() { SetAfterStatForTest(nil) })
		got, err := CaptureUpperDry(r.s, Upper{Dir: dir, Base: r.head()})
		if grew := size > int64(len(old)); grew && (err != nil || len(got.Changes.Changes) != 1) {
			t.Errorf("dry capture of a file that grew: %+v, %v; want the change", got, err)
		} else if !grew && !errors.Is(err, ErrChanged) {
			t.Errorf("dry capture of a file that shrank: %v; want %v", err, ErrChanged)
		}
	}
}

// TestCaptureEntryReplacedWhileRead: an entry replaced by one of another
// kind between capture's lstat and its open — a file by a symlink or a
// directory, a directory by a file or a symlink, a symlink by a file —
// fails the capture with ErrChanged naming it, not with the open's ELOOP
// or ENOTDIR, a read's EISDIR or a readlink's EINVAL as an internal error.
func TestCaptureEntryReplacedWhileRead(t *testing.T) {
	cases := []struct {
		name    string
		dir     bool // the entry capture saw is a directory
		replace func(p string) error
	}{
		{"file by symlink", false, func(p string) error { return os.Symlink("elsewhere", p) }},
		{"file by directory", false, func(p string) error { return os.Mkdir(p, 0o755) }},
		{"directory by file", true, func(p string) error { return os.WriteFile(p, []byte("f\n"), 0o644) }},
		{"directory by symlink", true, func(p string) error { return os.Symlink("elsewhere", p) }},
		{"symlink by file", false, func(p string) error { return os.WriteFile(p, []byte("f\n"), 0o644) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRepo(t, map[string]string{"a.txt": "a\n"})
			dir := t.TempDir()
			p := filepath.Join(dir, "e")
			var err error
			switch {
			case c.dir:
				err = os.MkdirAll(filepath.Join(p, "sub"), 0o755)
			case strings.HasPrefix(c.name, "symlink"):
				err = os.Symlink("target", p)
			default:
				err = os.WriteFile(p, []byte("new\n"), 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
			replaced := 0
			SetAfterLstatForTest(func(path string) {
				if path != "e" {
					return
				}
				if err := errors.Join(os.RemoveAll(p), c.replace(p)); err != nil {
					t.Errorf("replace %s: %v", path, err)
				}
				replaced++
			})
			t.Cleanup(func() { SetAfterLstatForTest(nil) })
			_, err = CaptureUpper(r.s, Upper{Dir: dir, Base: r.head()})
			if replaced != 1 {
				t.Fatalf("replaced %d times, want once", replaced)
			}
			if !errors.Is(err, ErrChanged) || !strings.Contains(err.Error(), "e: ") {
				t.Fatalf("capture: %v; want %v naming e", err, ErrChanged)
			}
		})
	}
}
