package publish

import (
	"bytes"
	"errors"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/layerfs/layerfs/extents"
	"github.com/layerfs/layerfs/store"
)

// TestCompareLowerPatches: the ranges compareLower finds, patched into the
// lower version, make the upper file's canonical content.
func TestCompareLowerPatches(t *testing.T) {
	dir, lowerPath, old, st, f := lowerFixture(t, 7, 3<<20+123)
	edits := map[string]func([]byte) []byte{
		"same":        func(b []byte) []byte { return b },
		"ten bytes":   func(b []byte) []byte { copy(b[2<<20+7:], "0123456789"); return b },
		"two places":  func(b []byte) []byte { copy(b[5:], "x"); copy(b[3<<20:], "yy"); return b },
		"truncate":    func(b []byte) []byte { return b[:1<<20+5] },
		"append":      func(b []byte) []byte { return append(b, bytes.Repeat([]byte("z"), 300<<10)...) },
		"last byte":   func(b []byte) []byte { b[len(b)-1]++; return b },
		"cut and tip": func(b []byte) []byte { b = b[:2<<20]; b[0]++; return b },
	}
	for name, edit := range edits {
		want := edit(bytes.Clone(old))
		upperPath := filepath.Join(dir, "upper-"+name)
		if err := os.WriteFile(upperPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
		up, err := os.Open(upperPath)
		if err != nil {
			t.Fatal(err)
		}
		ranges, err := compareLower(up, int64(len(want)), lowerPath, int64(len(old)), math.MaxInt64)
		if errors.Is(err, errNotResident) {
			up.Close()
			t.Skipf("%s: the test files are not in the page cache", name)
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		g, err := extents.Patch(st, f, up, int64(len(want)), ranges)
		up.Close()
		if err != nil {
			t.Fatalf("%s: patch: %v", name, err)
		}
		if canon, _ := extents.WriteBytes(st, want); canon != g {
			t.Errorf("%s: patched %s/%d, want %s/%d (ranges %v)", name, g.ID.Short(), g.Size, canon.ID.Short(), canon.Size, ranges)
		}
	}
	prepended := append([]byte("0123456789"), old...)
	if err := os.WriteFile(filepath.Join(dir, "prepended"), prepended, 0o644); err != nil {
		t.Fatal(err)
	}
	up, _ := os.Open(filepath.Join(dir, "prepended"))
	defer up.Close()
	if _, err := compareLower(up, int64(len(prepended)), lowerPath, int64(len(old)), 1<<20); !errors.Is(err, extents.ErrTooDifferent) {
		t.Errorf("prepended: %v, want ErrTooDifferent", err)
	}
}

// TestSpliceLower: a file whose size changed by one run of bytes anywhere
// is found as that one splice, which makes its canonical content.
func TestSpliceLower(t *testing.T) {
	dir, lowerPath, old, st, f := lowerFixture(t, 8, 3<<20+77)
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for name, want := range map[string][]byte{
		"prepend":        cat([]byte("0123456789"), old),
		"insert":         cat(old[:1<<20+3], []byte("inserted"), old[1<<20+3:]),
		"delete":         cat(old[:2<<20], old[2<<20+100:]),
		"replace longer": cat(old[:5], bytes.Repeat([]byte("r"), 70<<10), old[9:]),
		"append":         cat(old, []byte("tail")),
		"truncate":       old[:len(old)-1000],
		"repeat edge":    cat(old[:100], old[99:]), // a byte doubled: the splice may sit anywhere in the run
	} {
		upperPath := filepath.Join(dir, "upper")
		if err := os.WriteFile(upperPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
		up, err := os.Open(upperPath)
		if err != nil {
			t.Fatal(err)
		}
		off, del, ins, err := spliceLower(up, int64(len(want)), lowerPath, int64(len(old)))
		if errors.Is(err, errNotResident) {
			up.Close()
			t.Skip("the test files are not in the page cache")
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := cat(old[:off], want[off:off+ins], old[off+del:]); !bytes.Equal(got, want) {
			t.Fatalf("%s: splice %d for %d at %d does not make the file", name, ins, del, off)
		}
		if ins+del > 100<<10 {
			t.Errorf("%s: splice of %d for %d, more than the change", name, ins, del)
		}
		g, err := extents.Splice(st, f, off, del, want[off:off+ins])
		up.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if canon, _ := extents.WriteBytes(st, want); canon != g {
			t.Errorf("%s: spliced %s/%d, want %s/%d", name, g.ID.Short(), g.Size, canon.ID.Short(), canon.Size)
		}
	}
}

// TestCompareShortLowerIsAnError: a lower file that cannot be read in
// full (here: cut short after it was opened) is an error, not a crash.
func TestCompareShortLowerIsAnError(t *testing.T) {
	dir := t.TempDir()
	data := bytes.Repeat([]byte("lower "), 200<<10)
	path := filepath.Join(dir, "lower")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	lf, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "upper"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	up, err := os.Open(filepath.Join(dir, "upper"))
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	if _, err := commonPrefix(up, lf, int64(len(data))); err == nil {
		t.Error("commonPrefix over a lower file cut short: no error")
	}
	if _, err := commonSuffix(up, int64(len(data)), lf, int64(len(data)), int64(len(data))); err == nil {
		t.Error("commonSuffix over a lower file cut short: no error")
	}
	c := comparer{upper: up, lower: lf, common: int64(len(data)), limit: math.MaxInt64}
	if err := c.run(); err == nil {
		t.Error("compare over a lower file cut short: no error")
	}
}

// lowerFixture writes size random bytes (from seed) as a lower file in a
// temporary directory and as a stored file: the old version capture
// compares with.
func lowerFixture(t *testing.T, seed int64, size int) (dir, lowerPath string, old []byte, st *store.Stage, f extents.File) {
	t.Helper()
	dir = t.TempDir()
	old = make([]byte, size)
	rand.New(rand.NewSource(seed)).Read(old)
	lowerPath = filepath.Join(dir, "lower")
	if err := os.WriteFile(lowerPath, old, 0o644); err != nil {
		t.Fatal(err)
	}
	st = store.NewTestStore(t).NewStage()
	f, err := extents.WriteBytes(st, old)
	if err != nil {
		t.Fatal(err)
	}
	return dir, lowerPath, old, st, f
}
