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
	s := store.NewTestStore(t)
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(7))
	old := make([]byte, 3<<20+123)
	rng.Read(old)
	lowerPath := filepath.Join(dir, "lower")
	if err := os.WriteFile(lowerPath, old, 0o644); err != nil {
		t.Fatal(err)
	}
	st := s.NewStage()
	f, err := extents.WriteBytes(st, old)
	if err != nil {
		t.Fatal(err)
	}
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
