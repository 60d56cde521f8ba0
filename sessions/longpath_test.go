package sessions

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The *L helpers reach entries whose path is longer than PATH_MAX.
func TestLongPathHelpers(t *testing.T) {
	base := t.TempDir()
	dir := base
	for range 20 {
		dir = filepath.Join(dir, strings.Repeat("d", 250))
		if err := mkdirL(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if len(dir) < unix.PathMax {
		t.Fatalf("the test's path is %d bytes, want more than PATH_MAX", len(dir))
	}
	a, b := filepath.Join(dir, "a"), filepath.Join(base, "b")
	if err := mkdirL(a, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := chmodL(a, 0o750); err != nil {
		t.Fatal(err)
	}
	ts := []unix.Timespec{{Sec: 5}, {Sec: 7}}
	if err := utimesL(a, ts); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := lstatL(a, &st); err != nil || st.Mode&0o777 != 0o750 || st.Mtim.Sec != 7 {
		t.Fatalf("lstat: %v, mode %o, mtime %d", err, st.Mode&0o777, st.Mtim.Sec)
	}
	if err := setxattrL(a, "user.layerfs", []byte("y")); errors.Is(err, unix.ENOTSUP) {
		t.Log("no user xattrs here")
	} else if v, gerr := getxattrL(a, "user.layerfs"); err != nil || gerr != nil || v != "y" {
		t.Fatalf("xattr: set %v, get %q, %v", err, v, gerr)
	} else if has, err := hasXattrL(a, "user.layerfs"); err != nil || !has {
		t.Fatalf("has xattr: %v, %v", has, err)
	} else if err := removexattrL(a, "user.layerfs"); err != nil {
		t.Fatal(err)
	}
	if err := renameL(a, b); err != nil {
		t.Fatal(err)
	}
	if err := renameL(b, a); err != nil {
		t.Fatal(err)
	}
	if empty, err := dirEmpty(a); err != nil || !empty {
		t.Fatalf("dirEmpty: %v, %v", empty, err)
	}
	if err := removeL(a); err != nil {
		t.Fatal(err)
	}
	if err := lstatL(a, &st); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("lstat after remove: %v", err)
	}
}
