package sessions

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeOverlay stands in for the overlay xattrs, which need root: a file
// named *.meta is a metacopy, a directory named *.moved was renamed.
func fakeOverlay(path, name string) (bool, error) {
	if _, err := os.Lstat(path); err != nil {
		return false, err
	}
	switch name {
	case "trusted.overlay.metacopy":
		return strings.HasSuffix(path, ".meta"), nil
	case "trusted.overlay.redirect":
		return strings.HasSuffix(path, ".moved"), nil
	}
	return false, nil
}

// scanKept scans kept entry rel of upper as the last scan left it, and
// returns the scan.
func scanKept(t *testing.T, upper, rel string, seen map[string]seenDir, settled int64) *keptScan {
	t.Helper()
	s := &keptScan{upper: upper, has: fakeOverlay, settled: settled, seen: seen, next: map[string]seenDir{}}
	if err := s.entry(rel); err != nil {
		t.Fatal(err)
	}
	return s
}

func mkfiles(t *testing.T, root string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(p, "/") {
			continue
		}
		if err := os.WriteFile(full, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A directory as the last scan saw it is not read again; one that
// changed is, alone, and what it holds from the lower layer is found
// every time; a renamed directory is not descended; a directory that
// changed too lately is not remembered.
func TestKeptScanRemembers(t *testing.T) {
	upper := t.TempDir()
	mkfiles(t, upper, "nm/p1/a", "nm/p1/b", "nm/p2/c", "nm/p2/q/d")
	always := int64(math.MaxInt64)

	s := scanKept(t, upper, "nm", nil, always)
	if s.reads != 4 || len(s.metacopy)+len(s.renamed) != 0 {
		t.Fatalf("first scan: %d reads, found %v %v; want 4, nothing", s.reads, s.metacopy, s.renamed)
	}
	s = scanKept(t, upper, "nm", s.next, always)
	if s.reads != 0 {
		t.Fatalf("unchanged: %d reads, want 0", s.reads)
	}

	time.Sleep(20 * time.Millisecond) // past a coarse clock's tick
	mkfiles(t, upper, "nm/p2/x.meta", "nm/p1/d.moved/inner.meta")
	s = scanKept(t, upper, "nm", s.next, always)
	if s.reads != 2 || !slices.Equal(s.metacopy, []string{"nm/p2/x.meta"}) || !slices.Equal(s.renamed, []string{"nm/p1/d.moved"}) {
		t.Fatalf("after changes: %d reads, found %v %v; want 2 (p1, p2), nm/p2/x.meta, nm/p1/d.moved", s.reads, s.metacopy, s.renamed)
	}
	// Directories holding such entries are read every time: the carry
	// copies them up, and they are found again until they are plain.
	s = scanKept(t, upper, "nm", s.next, always)
	if s.reads != 2 || len(s.metacopy) != 1 || len(s.renamed) != 1 {
		t.Fatalf("again: %d reads, found %v %v", s.reads, s.metacopy, s.renamed)
	}

	// A kept file alone, and a directory changed too lately to trust.
	if s := scanKept(t, upper, "nm/p2/x.meta", nil, always); !slices.Equal(s.metacopy, []string{"nm/p2/x.meta"}) {
		t.Fatalf("a kept file: %v", s.metacopy)
	}
	s = scanKept(t, upper, "nm", nil, 0)
	if s = scanKept(t, upper, "nm", s.next, 0); s.reads != 4 {
		t.Fatalf("nothing settled: %d reads, want all 4 (not the renamed one)", s.reads)
	}
}
