package layerfs

import (
	"testing"

	"github.com/layerfs/layerfs/publish"
)

// TestUpToDateMakesNoCommit: calls whose result equals the head's tree make
// no Commit, no Layer and no objects, even from a stale base, and report
// the head they met.
func TestUpToDateMakesNoCommit(t *testing.T) {
	st, f := newProject(t)
	stale, _ := st.FS("main") // reads, then falls behind
	mustRead(t, stale, "README.md")
	expect(t, publish.Committed)(f.Write("other.txt", []byte("moves head\n")))
	head := f.Base()
	before, err := st.Backend().Stats()
	if err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() (*Result, error){
		"same bytes, stale base": func() (*Result, error) { return stale.Write("README.md", []byte("# hello\n")) },
		"same bytes, own write":  func() (*Result, error) { return f.Write("other.txt", []byte("moves head\n")) },
		"existing dir":           func() (*Result, error) { return f.Mkdir("src/a") },
		"same mode":              func() (*Result, error) { return f.Chmod("README.md", 0o644) },
		"empty batch":            func() (*Result, error) { return f.Batch(func(*Batch) error { return nil }) },
		"truncate to size":       func() (*Result, error) { return f.Truncate("README.md", 8) },
	} {
		res := expect(t, publish.UpToDate)(call())
		if res.Head != head || !res.Commit.IsZero() {
			t.Errorf("%s: head %s commit %s, want head %s and no commit", name, res.Head.Short(), res.Commit.Short(), head.Short())
		}
	}
	if b, _ := st.Backend().Branch("main"); b.Head != head {
		t.Fatalf("an UpToDate call moved main to %s", b.Head.Short())
	}
	after, err := st.Backend().Stats()
	if err != nil {
		t.Fatal(err)
	}
	if after.Objects != before.Objects || after.Layers != before.Layers {
		t.Errorf("UpToDate calls stored %d objects and %d layers", after.Objects-before.Objects, after.Layers-before.Layers)
	}
	if stale.Base() != head {
		t.Errorf("an UpToDate call must move the caller's base to the head it met: %s", stale.Base().Short())
	}
}
