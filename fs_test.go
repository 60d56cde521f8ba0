package layerfs

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
	"strings"
	"testing"

	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/publish"
	"github.com/layerfs/layerfs/store"
)

// newProject inits a small project and returns a Store and an FS on main.
func newProject(t *testing.T) (*Store, *FS) {
	t.Helper()
	st, _ := newTestStore(t)
	if _, err := st.Init(sampleTree(t), InitOptions{}); err != nil {
		t.Fatal(err)
	}
	f, err := st.FS("main")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if rep, err := st.Backend().Fsck(); err != nil || !rep.OK() {
			t.Errorf("fsck: %v %v", err, rep.Problems)
		}
	})
	return st, f
}

// expect returns a checker for a call's result: expect(t, want)(f.Write(...)).
func expect(t *testing.T, want publish.Status) func(*Result, error) *Result {
	return func(res *Result, err error) *Result {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != want {
			t.Fatalf("status %s (paths %v), want %s", res.Status, res.Paths, want)
		}
		return res
	}
}

func mustRead(t *testing.T, f *FS, p string) string {
	t.Helper()
	data, err := f.Read(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestWriteReadAndUpToDate(t *testing.T) {
	st, f := newProject(t)
	head0 := f.Base()
	res := expect(t, publish.Committed)(f.Write("new/dir/a.txt", []byte("one\n"), Call{ID: "req-1"}))
	if got := mustRead(t, f, "new/dir/a.txt"); got != "one\n" {
		t.Fatalf("read back %q", got)
	}
	c, _ := st.Backend().Commit(res.Commit)
	if c.Origin != "operation:req-1" || len(c.Parents) != 1 || c.Parents[0] != head0 {
		t.Errorf("commit %+v", c)
	}
	expect(t, publish.UpToDate)(f.Write("new/dir/a.txt", []byte("one\n")))
	if b, _ := st.Backend().Branch("main"); b.Head != res.Commit {
		t.Error("an UpToDate write moved the branch")
	}
	info, err := f.Stat("new/dir")
	if err != nil || info.Kind != "dir" {
		t.Errorf("implicit parent: %+v %v", info, err)
	}
	old, err := st.FS(head0.String())
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := old.Exists("new/dir/a.txt"); ok {
		t.Error("a commit's view must not change")
	}
	if _, err := old.Write("x", nil); !errors.Is(err, ErrReadOnlyFS) {
		t.Errorf("write to a commit: %v", err)
	}
	l1, _ := st.FS("L1")
	if got, _ := l1.Read("README.md"); string(got) != "# hello\n" {
		t.Errorf("read at a layer: %q", got)
	}
}

func TestDisjointWritesBothLand(t *testing.T) {
	st, a := newProject(t)
	b, _ := st.FS("main")
	expect(t, publish.Committed)(a.Write("a.txt", []byte("a")))
	res := expect(t, publish.Committed)(b.Write("b.txt", []byte("b")))
	if res.Head == b.Base() {
		t.Error("b's commit must land on the newer head")
	}
	for p, want := range map[string]string{"a.txt": "a", "b.txt": "b"} {
		if got := mustRead(t, a, p); got != want {
			t.Errorf("%s = %q", p, got)
		}
	}
}

func TestSameFileConflict(t *testing.T) {
	st, a := newProject(t)
	b, _ := st.FS("main")
	expect(t, publish.Committed)(a.Write("README.md", []byte("from a\n")))
	head := a.Base()
	res := expect(t, publish.Conflict)(b.Edit("README.md", "hello", "bye", false))
	if len(res.Paths) != 1 || res.Paths[0] != "README.md" || res.Head != head {
		t.Errorf("conflict %+v, want README.md at %s", res, head.Short())
	}
	if got := mustRead(t, b, "README.md"); got != "from a\n" {
		t.Errorf("branch must hold the winner: %q", got)
	}
	// Having read the new head, b edits again and lands.
	expect(t, publish.Committed)(b.Edit("README.md", "from a", "from b", false))
}

// TestNoFinalNewlineAgainstAppend: a write that drops the file's final
// newline and one that appends a line cannot both land; merged, the two
// last lines would join into one that neither side wrote.
func TestNoFinalNewlineAgainstAppend(t *testing.T) {
	st, a := newProject(t)
	expect(t, publish.Committed)(a.Write("f", []byte("a\nb\n")))
	b, _ := st.FS("main")
	expect(t, publish.Committed)(a.Write("f", []byte("a\nb\nc\n")))
	res := expect(t, publish.Conflict)(b.Write("f", []byte("a\nb")))
	if len(res.Paths) != 1 || res.Paths[0] != "f" {
		t.Errorf("conflict %+v, want f", res)
	}
	if got := mustRead(t, a, "f"); got != "a\nb\nc\n" {
		t.Errorf("f = %q", got)
	}
}

func TestWriteAtNegativeOffset(t *testing.T) {
	_, f := newProject(t)
	if _, err := f.WriteAt("README.md", -1, []byte("x")); !errors.Is(err, ErrBadOffset) || strings.Contains(err.Error(), "path") {
		t.Errorf("WriteAt at -1: %v", err)
	}
}

func TestEditRules(t *testing.T) {
	_, f := newProject(t)
	expect(t, publish.Committed)(f.Write("t.txt", []byte("x y x\n")))
	if _, err := f.Edit("t.txt", "x", "z", false); !errors.Is(err, ErrManyMatch) || !strings.Contains(err.Error(), "2 times") {
		t.Errorf("ambiguous edit: %v", err)
	}
	if _, err := f.Edit("t.txt", "q", "z", false); !errors.Is(err, ErrNoMatch) {
		t.Errorf("missing text: %v", err)
	}
	expect(t, publish.Committed)(f.Edit("t.txt", "x", "z", true))
	if got := mustRead(t, f, "t.txt"); got != "z y z\n" {
		t.Errorf("replace all: %q", got)
	}
	if _, err := f.Edit("data.bin", "a", "b", false); !errors.Is(err, ErrBinary) {
		t.Errorf("edit binary: %v", err)
	}
	if _, err := f.Edit("src", "a", "b", false); !errors.Is(err, ErrIsDir) {
		t.Errorf("edit dir: %v", err)
	}
}

func TestBadInputLeavesBranchAlone(t *testing.T) {
	st, f := newProject(t)
	before, _ := st.Backend().Branch("main")
	for name, call := range map[string]func() (*Result, error){
		"dotdot":       func() (*Result, error) { return f.Write("../x", nil) },
		"absolute":     func() (*Result, error) { return f.Write("/etc/x", nil) },
		"empty part":   func() (*Result, error) { return f.Write("a//b", nil) },
		"nul":          func() (*Result, error) { return f.Write("a\x00b", nil) },
		"long name":    func() (*Result, error) { return f.Write(strings.Repeat("n", 256), nil) },
		"under file":   func() (*Result, error) { return f.Write("README.md/x", nil) },
		"delete none":  func() (*Result, error) { return f.Delete("nope") },
		"write dir":    func() (*Result, error) { return f.Write("src", nil) },
		"move onto":    func() (*Result, error) { return f.Move("README.md", "link") },
		"move missing": func() (*Result, error) { return f.Move("nope", "x") },
		"move inside":  func() (*Result, error) { return f.Move("src", "src/a/x") },
		"truncate neg": func() (*Result, error) { return f.Truncate("README.md", -1) },
		"root":         func() (*Result, error) { return f.Delete("") },
	} {
		if res, err := call(); err == nil {
			t.Errorf("%s: accepted (%v)", name, res.Status)
		}
	}
	_, err := f.Batch(func(b *Batch) error {
		b.Write("partial", []byte("x"))
		return errors.New("caller gave up")
	})
	if err == nil {
		t.Error("batch error swallowed")
	}
	if after, _ := st.Backend().Branch("main"); after.Head != before.Head {
		t.Error("refused calls moved the branch")
	}
}

func TestBatchAndTreeOps(t *testing.T) {
	st, f := newProject(t)
	res := expect(t, publish.Committed)(f.Batch(func(b *Batch) error {
		if err := b.Mkdir("d/e"); err != nil {
			return err
		}
		if err := b.Write("d/e/f.txt", []byte("hello")); err != nil {
			return err
		}
		if err := b.Append("d/e/f.txt", []byte(" world")); err != nil {
			return err
		}
		if got, _ := b.Read("d/e/f.txt"); string(got) != "hello world" {
			t.Errorf("batch reads its own writes: %q", got)
		}
		if err := b.Move("src", "lib"); err != nil {
			return err
		}
		if err := b.Symlink("d/link", "e/f.txt"); err != nil {
			return err
		}
		return b.Chmod("d/e/f.txt", 0o600)
	}, Call{Message: "several things"}))
	c, _ := st.Backend().Commit(res.Commit)
	if c.Message != "several things" {
		t.Errorf("message %q", c.Message)
	}
	if got := mustRead(t, f, "lib/a/b/c.go"); got != "package c\n" {
		t.Errorf("moved tree: %q", got)
	}
	if ok, _ := f.Exists("src"); ok {
		t.Error("move left the source")
	}
	if info, _ := f.Stat("d/link"); info.Target != "e/f.txt" {
		t.Errorf("symlink: %+v", info)
	}
	if info, _ := f.Stat("d/e/f.txt"); info.Mode != 0o600 || info.Size != 11 {
		t.Errorf("chmod/append: %+v", info)
	}
	expect(t, publish.Committed)(f.Truncate("d/e/f.txt", 5))
	expect(t, publish.Committed)(f.WriteAt("d/e/f.txt", 7, []byte("!")))
	if got := mustRead(t, f, "d/e/f.txt"); got != "hello\x00\x00!" {
		t.Errorf("truncate + writeAt past the end: %q", got)
	}
	expect(t, publish.Committed)(f.Delete("lib"))
	if got, _ := f.Glob("**/*.txt"); strings.Join(got, ",") != "d/e/f.txt" {
		t.Errorf("glob: %v", got)
	}
	list, _ := f.List("d")
	if len(list) != 2 || list[0].Name != "e" || list[1].Name != "link" {
		t.Errorf("list: %+v", list)
	}
	// A symlink is neither replaced by a file nor written through.
	for name, call := range map[string]func() (*Result, error){
		"write":   func() (*Result, error) { return f.Write("d/link", []byte("x")) },
		"append":  func() (*Result, error) { return f.Append("d/link", []byte("x")) },
		"writeAt": func() (*Result, error) { return f.WriteAt("d/link", 0, []byte("x")) },
		"edit":    func() (*Result, error) { return f.Edit("d/link", "e", "x", false) },
		"symlink": func() (*Result, error) { return f.Symlink("d/link", "elsewhere") },
	} {
		_, err := call()
		want := ErrIsSymlink
		if name == "symlink" {
			want = ErrExists
		}
		if !errors.Is(err, want) {
			t.Errorf("%s over a symlink: %v, want %v", name, err, want)
		}
	}
	if info, _ := f.Stat("d/link"); info.Kind != "symlink" || info.Target != "e/f.txt" {
		t.Errorf("the symlink after refused writes: %+v", info)
	}
}

func TestWriteAtCostsTheChange(t *testing.T) {
	st, f := newProject(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 2<<20) // 32 MiB
	expect(t, publish.Committed)(f.Write("big", big))
	s0, _ := st.Backend().Stats()
	for i := 0; i < 16; i++ {
		expect(t, publish.Committed)(f.WriteAt("big", int64(i)*(2<<20)+12345, []byte("0123456789")))
	}
	s1, _ := st.Backend().Stats()
	grew := s1.StoredBytes - s0.StoredBytes
	t.Logf("16 writeAts of 10 bytes into 32 MiB: +%d stored bytes", grew)
	if grew > 256<<10 {
		t.Errorf("16 writeAts of 10 bytes grew the Store by %d bytes", grew)
	}
	var _ object.ID
}

// TestReaderStreamsWhatReadReturns: Reader gives the bytes Read does, for
// a file of many chunks, an empty one and a symlink (its target), and
// refuses a directory as Read does.
func TestReaderStreamsWhatReadReturns(t *testing.T) {
	_, f := newProject(t)
	big := make([]byte, 5<<20+123)
	rand.New(rand.NewSource(1)).Read(big)
	expect(t, publish.Committed)(f.Write("big.bin", big))
	expect(t, publish.Committed)(f.Write("none", nil))
	expect(t, publish.Committed)(f.Symlink("biglink", "big.bin"))
	for _, p := range []string{"big.bin", "none", "biglink", "link", "README.md"} {
		want, err := f.Read(p)
		if err != nil {
			t.Fatal(err)
		}
		r, err := f.Reader(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(got, want) || r.Size() != int64(len(want)) {
			t.Errorf("%s: %d bytes (size %d), %v; want %d", p, len(got), r.Size(), err, len(want))
		}
	}
	if _, err := f.Reader("."); !errors.Is(err, ErrIsDir) {
		t.Errorf("a directory: %v", err)
	}
	if _, err := f.Reader("missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a missing file: %v", err)
	}
}
