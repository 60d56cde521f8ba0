package layerfs

import (
	"fmt"
	"math/rand"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/layerfs/layerfs/publish"
	"github.com/layerfs/layerfs/store"
)

func ownersOf(t *testing.T, st *Store, ref, path string) []string {
	t.Helper()
	b, err := st.Blame(ref, path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range b.Ranges {
		for i := r.Start; i <= r.End; i++ {
			out = append(out, r.Owner)
		}
	}
	return out
}

// TestBlameMatchesModel: 100 edit Commits by 10 origins on a 1,000-line
// file; every line's owner is checked against a simple model.
func TestBlameMatchesModel(t *testing.T) {
	st, f := newProject(t)
	r := rand.New(rand.NewSource(7))
	lines := make([]string, 1000)
	owners := make([]string, 1000)
	for i := range lines {
		lines[i] = fmt.Sprintf("line %d\n", i)
		owners[i] = "operation:creator"
	}
	expect(t, publish.Committed)(f.Write("big.txt", []byte(strings.Join(lines, "")), Call{ID: "creator"}))
	for c := 0; c < 100; c++ {
		origin := fmt.Sprintf("agent-%d", c%10)
		for k := 0; k < 1+r.Intn(5); k++ {
			at := r.Intn(len(lines))
			switch r.Intn(3) {
			case 0: // replace a line
				lines[at] = fmt.Sprintf("edit %d.%d\n", c, k)
				owners[at] = "operation:" + origin
			case 1: // insert a line
				lines = append(lines[:at], append([]string{fmt.Sprintf("new %d.%d\n", c, k)}, lines[at:]...)...)
				owners = append(owners[:at], append([]string{"operation:" + origin}, owners[at:]...)...)
			case 2: // delete a line
				lines = append(lines[:at], lines[at+1:]...)
				owners = append(owners[:at], owners[at+1:]...)
			}
		}
		expect(t, publish.Committed)(f.Write("big.txt", []byte(strings.Join(lines, "")), Call{ID: origin}))
	}
	start := time.Now()
	got := ownersOf(t, st, "main", "big.txt")
	t.Logf("blame of %d lines after 100 commits: %v", len(lines), time.Since(start))
	if len(got) != len(owners) {
		t.Fatalf("%d owned lines, want %d", len(got), len(owners))
	}
	for i := range owners {
		if got[i] != owners[i] {
			t.Fatalf("line %d owned by %s, want %s", i+1, got[i], owners[i])
		}
	}
	if got := ownersOf(t, st, "main", "README.md"); len(got) != 1 || got[0] != store.OwnerOriginal {
		t.Errorf("untouched init file: %v", got)
	}
}

// TestBlameThroughEmptyAndRewrites: a file emptied, rewritten in whole,
// then edited keeps exactly the owners of the lines each write kept.
func TestBlameThroughEmptyAndRewrites(t *testing.T) {
	st, f := newProject(t)
	for _, w := range []struct {
		id, text string
		want     []string
	}{
		{"a", "x\ny\n", []string{"a", "a"}},
		{"b", "", nil},
		{"c", "x\nz\n", []string{"c", "c"}},
		{"d", "p\nq", []string{"d", "d"}},
		{"e", "p\nq\nr\n", []string{"d", "e", "e"}},
	} {
		expect(t, publish.Committed)(f.Write("f.txt", []byte(w.text), Call{ID: w.id}))
		got := ownersOf(t, st, "main", "f.txt")
		if len(got) != len(w.want) {
			t.Fatalf("after %s: owners %v, want %v", w.id, got, w.want)
		}
		for i := range got {
			if got[i] != "operation:"+w.want[i] {
				t.Fatalf("after %s: owners %v, want %v", w.id, got, w.want)
			}
		}
	}
}

// TestBlameSurvivesAuditFailure: a Commit whose ownership failed to be
// recorded still blames right, and so do the Commits after it: the
// owners are worked out from history.
func TestBlameSurvivesAuditFailure(t *testing.T) {
	st, f := newProject(t)
	expect(t, publish.Committed)(f.Write("a.txt", []byte("1\n2\n3\n"), Call{ID: "one"}))
	st.Backend().FailAuditForTest(true)
	res := expect(t, publish.Committed)(f.Write("a.txt", []byte("1\ntwo\n3\n"), Call{ID: "two"}))
	st.Backend().FailAuditForTest(false)
	if res.AuditErr == nil {
		t.Fatal("the injected audit failure was not reported")
	}
	if got := mustRead(t, f, "a.txt"); got != "1\ntwo\n3\n" {
		t.Fatalf("the commit must stand: %q", got)
	}
	if got := strings.Join(ownersOf(t, st, "main", "a.txt"), ","); got != "operation:one,operation:two,operation:one" {
		t.Errorf("after a failed append: %s", got)
	}
	expect(t, publish.Committed)(f.Write("a.txt", []byte("1\ntwo\n3\nfour\n"), Call{ID: "three"}))
	if got := strings.Join(ownersOf(t, st, "main", "a.txt"), ","); got != "operation:one,operation:two,operation:one,operation:three" {
		t.Errorf("after a later commit: %s", got)
	}
}

// TestBlameAtAnOlderRef: the same content written again later — here on
// another branch — does not rename the owners of what an older Commit
// holds; at the newer Commit, its own row counts.
func TestBlameAtAnOlderRef(t *testing.T) {
	st, f := newProject(t)
	expect(t, publish.Committed)(f.Write("README.md", []byte("other\n"), Call{ID: "two"}))
	if _, err := st.Fork("scratch", "main"); err != nil {
		t.Fatal(err)
	}
	s, err := st.FS("scratch")
	if err != nil {
		t.Fatal(err)
	}
	expect(t, publish.Committed)(s.Write("README.md", []byte("# hello\n"), Call{ID: "later"}))
	if got := strings.Join(ownersOf(t, st, "L1", "README.md"), ","); got != "original" {
		t.Errorf("blame at L1 after the same content was written on another branch: %s", got)
	}
	if got := strings.Join(ownersOf(t, st, "scratch", "README.md"), ","); got != "operation:later" {
		t.Errorf("blame at scratch: %s", got)
	}
	// Written back on main too, later: main's own row.
	expect(t, publish.Committed)(f.Write("README.md", []byte("# hello\n"), Call{ID: "back"}))
	if got := strings.Join(ownersOf(t, st, "main", "README.md"), ","); got != "operation:back" {
		t.Errorf("blame at main: %s", got)
	}
	if got := strings.Join(ownersOf(t, st, "scratch", "README.md"), ","); got != "operation:later" {
		t.Errorf("blame at scratch after main's: %s", got)
	}
}

// TestBlameSameContentOnAnotherBranch: another branch writes a file back
// to what init left; main, which never changed it, then commits
// something else. Main's blame still says original: the other branch's
// row is newer than nothing main holds, but it is not in main's history.
func TestBlameSameContentOnAnotherBranch(t *testing.T) {
	st, f := newProject(t)
	if _, err := st.Fork("scratch", "main"); err != nil {
		t.Fatal(err)
	}
	s, err := st.FS("scratch")
	if err != nil {
		t.Fatal(err)
	}
	expect(t, publish.Committed)(s.Write("README.md", []byte("x\n"), Call{ID: "x"}))
	expect(t, publish.Committed)(s.Write("README.md", []byte("# hello\n"), Call{ID: "later"}))
	expect(t, publish.Committed)(f.Write("other.txt", []byte("o\n"), Call{ID: "m"}))
	if got := strings.Join(ownersOf(t, st, "main", "README.md"), ","); got != "original" {
		t.Errorf("blame at main: %s", got)
	}
	if got := strings.Join(ownersOf(t, st, "scratch", "README.md"), ","); got != "operation:later" {
		t.Errorf("blame at scratch: %s", got)
	}
	// Main's next edit keeps the right owners.
	expect(t, publish.Committed)(f.Write("README.md", []byte("# hello\nmore\n"), Call{ID: "m2"}))
	if got := strings.Join(ownersOf(t, st, "main", "README.md"), ","); got != "original,operation:m2" {
		t.Errorf("blame at main after an edit: %s", got)
	}
}

func TestBlameMovesAndBinary(t *testing.T) {
	st, f := newProject(t)
	expect(t, publish.Committed)(f.Edit("src/a/b/c.go", "package c", "package c // edited", false, Call{ID: "ed"}))
	expect(t, publish.Committed)(f.Move("src", "lib", Call{ID: "mv"}))
	if got := ownersOf(t, st, "main", "lib/a/b/c.go"); len(got) != 1 || got[0] != "operation:ed" {
		t.Errorf("moved dir keeps owners: %v", got)
	}
	expect(t, publish.Committed)(f.Move("README.md", "READ.md", Call{ID: "mv2"}))
	if got := ownersOf(t, st, "main", "READ.md"); len(got) != 1 || got[0] != store.OwnerOriginal {
		t.Errorf("moved file keeps owners: %v", got)
	}
	expect(t, publish.Committed)(f.WriteAt("data.bin", 10, []byte{1, 2, 3}, Call{ID: "bin"}))
	b, err := st.Blame("main", "data.bin")
	if err != nil || !b.Binary || len(b.Ranges) != 1 || b.Ranges[0].Owner != "operation:bin" {
		t.Errorf("binary blame: %+v %v", b, err)
	}
}

func TestLogDiffReset(t *testing.T) {
	st, f := newProject(t)
	expect(t, publish.Committed)(f.Write("README.md", []byte("# hello\nworld\n"), Call{ID: "w1", Message: "add world"}))
	expect(t, publish.Committed)(f.Batch(func(b *Batch) error {
		b.Delete("dup1")
		return b.Write("src/new.go", []byte("package src\n"))
	}, Call{ID: "w2"}))
	log, err := st.Log("main", 0)
	if err != nil || len(log) != 3 {
		t.Fatalf("log: %d entries, %v", len(log), err)
	}
	if log[1].Origin != "operation:w1" || log[1].Message != "add world" || len(log[1].Changes) != 1 || log[1].Changes[0].Path != "README.md" {
		t.Errorf("log entry: %+v", log[1])
	}
	var kinds []string
	for _, c := range log[0].Changes {
		kinds = append(kinds, c.Path+":"+string(c.Kind))
	}
	if strings.Join(kinds, " ") != "dup1:deleted src/new.go:added" {
		t.Errorf("changes: %v", kinds)
	}
	text, err := st.DiffText("main~2", "main", 3)
	if err != nil || !strings.Contains(text, "+world\n") || !strings.Contains(text, "--- /dev/null\n+++ b/src/new.go") {
		t.Errorf("diff text:\n%s %v", text, err)
	}
	if _, err := st.Reset("main", "main~2"); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, f, "README.md"); got != "# hello\n" {
		t.Errorf("after reset: %q", got)
	}
	if _, err := st.Reset("main", "nope"); err == nil {
		t.Error("reset to an unknown ref")
	}
}

// TestDiffCostFollowsTheChange: a one-file change deep in a wide tree
// reads only the trees on its path.
func TestDiffCostFollowsTheChange(t *testing.T) {
	st, f := newProject(t)
	expect(t, publish.Committed)(f.Batch(func(b *Batch) error {
		for i := 0; i < 300; i++ {
			if err := b.Write(fmt.Sprintf("wide/d%03d/f.txt", i), []byte("x")); err != nil {
				return err
			}
		}
		return nil
	}))
	expect(t, publish.Committed)(f.Write("wide/d150/f.txt", []byte("y")))
	d, err := st.Diff("main~1", "main")
	if err != nil || len(d) != 1 || d[0].Path != "wide/d150/f.txt" || d[0].Kind != publish.Modified {
		t.Fatalf("diff: %+v %v", d, err)
	}
}

// TestBlameWhileHeadMoves: writers on one branch at once, so most commits
// find head moved at the lock and land on a newer one; every line still
// has the right owner, whether its row was worked out before the lock or
// after landing.
func TestBlameWhileHeadMoves(t *testing.T) {
	st, _ := newProject(t)
	const writers, files = 4, 12
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			f, err := st.FS("main")
			if err != nil {
				errs <- err
				return
			}
			for i := 0; i < files; i++ {
				p := fmt.Sprintf("w%d/f%d.txt", w, i)
				if _, err := f.Write(p, []byte("a\nb\nc\n"), Call{ID: fmt.Sprintf("w%d-%d", w, i)}); err != nil {
					errs <- err
					return
				}
				if _, err := f.Edit(p, "b\n", "B\n", false, Call{ID: fmt.Sprintf("e%d-%d", w, i)}); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for w := 0; w < writers; w++ {
		for i := 0; i < files; i++ {
			got := strings.Join(ownersOf(t, st, "main", fmt.Sprintf("w%d/f%d.txt", w, i)), ",")
			want := fmt.Sprintf("operation:w%d-%d,operation:e%d-%d,operation:w%d-%d", w, i, w, i, w, i)
			if got != want {
				t.Errorf("w%d/f%d.txt: owners %s, want %s", w, i, got, want)
			}
		}
	}
}

// TestDiffTextBinaryHasAHeader: a binary file's part starts with the same
// header as a text file's, so the output splits by it.
func TestDiffTextBinaryHasAHeader(t *testing.T) {
	st, f := newProject(t)
	expect(t, publish.Committed)(f.Write("bin.dat", []byte{0, 1, 2, 0, 255}))
	text, err := st.DiffText("L1", "main", 3)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "diff --layerfs a/bin.dat b/bin.dat (added)\nBinary files /dev/null and b/bin.dat differ\n") {
		t.Errorf("diff of a new binary file:\n%s", text)
	}
}

// TestDiffTextQuotesNames: a name holding a newline is quoted in the
// headers, as git does, so it cannot end a header or pass for a diff line.
func TestDiffTextQuotesNames(t *testing.T) {
	st, f := newProject(t)
	expect(t, publish.Committed)(f.Write("x\n+++ b/y", []byte("z\n")))
	text, err := st.DiffText("L1", "main", 3)
	if err != nil {
		t.Fatal(err)
	}
	want := "diff --layerfs \"a/x\\n+++ b/y\" \"b/x\\n+++ b/y\" (added)\n" +
		"--- /dev/null\n+++ \"b/x\\n+++ b/y\"\n@@ -0,0 +1 @@\n+z\n"
	if !strings.Contains(text, want) {
		t.Errorf("diff of a name with a newline:\n%s\nwant it to hold:\n%s", text, want)
	}
}

// TestDiffTextShowsAModeChange: a chmod alone says what changed, as git
// does, not just that the file did.
func TestDiffTextShowsAModeChange(t *testing.T) {
	st, f := newProject(t)
	expect(t, publish.Committed)(f.Write("run.sh", []byte("echo\n")))
	expect(t, publish.Committed)(f.Chmod("run.sh", 0o755))
	text, err := st.DiffText("main~1", "main", 3)
	if err != nil {
		t.Fatal(err)
	}
	if want := "diff --layerfs a/run.sh b/run.sh (modified)\nold mode 100644\nnew mode 100755\n"; text != want {
		t.Errorf("diff of a chmod:\n%s\nwant:\n%s", text, want)
	}
}

// TestDiffTextNamesABigBinaryWithoutReadingIt: that a binary file changed is
// told from its first bytes; both versions were read whole (a diff of two
// 150 MB versions took 3 s and 630 MB).
func TestDiffTextNamesABigBinaryWithoutReadingIt(t *testing.T) {
	st, f := newProject(t)
	data := make([]byte, 32<<20)
	rand.New(rand.NewSource(4)).Read(data)
	expect(t, publish.Committed)(f.Write("big.bin", data))
	data[len(data)-1]++
	expect(t, publish.Committed)(f.Write("big.bin", data))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	text, err := st.DiffText("main~1", "main", 3)
	runtime.ReadMemStats(&after)
	if err != nil || !strings.Contains(text, "Binary files a/big.bin and b/big.bin differ\n") {
		t.Fatalf("diff: %v\n%s", err, text)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 8<<20 {
		t.Errorf("the diff allocated %d MiB for two versions of a 32 MiB binary file", n>>20)
	}
}
