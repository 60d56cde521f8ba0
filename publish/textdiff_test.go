package publish

import (
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// applyOps rebuilds b from a and the ops, checking they describe b.
func applyOps(t *testing.T, a, b []string, ops []LineOp) {
	t.Helper()
	var got []string
	i, j := 0, 0
	for _, op := range ops {
		switch op.Kind {
		case Equal:
			if op.A != i || op.B != j {
				t.Fatalf("equal run at %d/%d, want %d/%d", op.A, op.B, i, j)
			}
			got = append(got, a[i:i+op.N]...)
			i, j = i+op.N, j+op.N
		case Delete:
			i += op.N
		case Insert:
			got = append(got, b[j:j+op.N]...)
			j += op.N
		}
	}
	if i != len(a) || strings.Join(got, "") != strings.Join(b, "") {
		t.Fatalf("ops do not turn a into b")
	}
}

func randomLines(r *rand.Rand, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = string(rune('a'+r.Intn(6))) + "\n"
	}
	return out
}

func TestDiffLinesRebuilds(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 300; i++ {
		a, b := randomLines(r, r.Intn(40)), randomLines(r, r.Intn(40))
		applyOps(t, a, b, DiffLines(a, b))
	}
}

func TestUnifiedMatchesDiff(t *testing.T) {
	if _, err := exec.LookPath("diff"); err != nil {
		t.Skip("no diff(1)")
	}
	r := rand.New(rand.NewSource(2))
	dir := t.TempDir()
	for i := 0; i < 100; i++ {
		a := randomLines(r, r.Intn(60))
		b := append([]string(nil), a...)
		for k := r.Intn(4); k >= 0 && len(b) > 0; k-- { // a few local edits
			at := r.Intn(len(b))
			b = append(b[:at], append(randomLines(r, r.Intn(3)), b[at+min(len(b)-at, r.Intn(3)):]...)...)
		}
		got := Unified("a", "b", a, b, 3)
		// Hunk layout can differ from GNU diff's when several minimal
		// diffs exist, so check that patch(1) applies ours instead.
		fa, fb := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		os.WriteFile(fa, []byte(strings.Join(a, "")), 0o644)
		os.WriteFile(filepath.Join(dir, "p"), []byte(got), 0o644)
		if got == "" {
			if strings.Join(a, "") != strings.Join(b, "") {
				t.Fatal("empty diff of different texts")
			}
			continue
		}
		cmd := exec.Command("patch", "-s", "-o", fb, fa, filepath.Join(dir, "p"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("patch rejects our diff: %v %s\n%s", err, out, got)
		}
		if data, _ := os.ReadFile(fb); string(data) != strings.Join(b, "") {
			t.Fatalf("patched text differs\n%s", got)
		}
	}
}

func TestUnifiedFormat(t *testing.T) {
	a := SplitLines([]byte("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n"))
	b := SplitLines([]byte("1\n2\n3\n4\nfive\n6\n7\n8\n9\n10"))
	want := `--- a
+++ b
@@ -2,9 +2,9 @@
 2
 3
 4
-5
+five
 6
 7
 8
 9
-10
+10
\ No newline at end of file
`
	if got := Unified("a", "b", a, b, 3); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestSharesLine(t *testing.T) {
	for _, c := range []struct {
		text  string
		lines []string
	}{
		{"", []string{"a\n"}},
		{"a\nb\n", nil},
		{"a\nb\n", []string{"b\n"}},
		{"a\nb", []string{"b\n"}},
		{"a\nb", []string{"b"}},
		{"a\nb\n", []string{"c\n", "a"}},
		{"\n\n", []string{"\n"}},
	} {
		want := !disjoint(SplitLines([]byte(c.text)), c.lines)
		if got := sharesLine([]byte(c.text), c.lines); got != want {
			t.Errorf("sharesLine(%q, %q) = %v, want %v", c.text, c.lines, got, want)
		}
	}
}

// TestDiffLinesPastRunes: versions with more distinct lines than there are
// runes still diff right (a line changed near the end was once read as
// unchanged: past the last rune, every line turned into the same U+FFFD).
func TestDiffLinesPastRunes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds over a million lines")
	}
	lines := func(prefix string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = prefix + strconv.Itoa(i) + "\n"
		}
		return out
	}
	a := lines("", 0x110000+10)
	b := append([]string(nil), a...)
	b[len(b)-3], b[5000] = "changed\n", "changed too\n"
	ops := DiffLines(a, b)
	applyOps(t, a, b, ops)
	if len(ops) != 7 {
		t.Errorf("two changed lines: %d ops, want 7: %v", len(ops), ops)
	}
	a, b = lines("a", 0x90000), lines("b", 0x90000)
	applyOps(t, a, b, DiffLines(a, b))
}

// TestDiffLinesBounded: two versions of 30k lines in another order are
// about 60k edits apart, which Myers took seconds to find (most of an
// hour at 200k lines, in a commit's blame or a merge); past the budget the
// lines between the common head and tail are replaced whole.
func TestDiffLinesBounded(t *testing.T) {
	a := make([]string, 30000)
	for i := range a {
		a[i] = strconv.Itoa(i) + "\n"
	}
	b := append([]string(nil), a...)
	rand.New(rand.NewSource(3)).Shuffle(len(b)-2, func(i, j int) { b[i+1], b[j+1] = b[j+1], b[i+1] })
	ops := DiffLines(a, b)
	applyOps(t, a, b, ops)
	if len(ops) != 4 || ops[1].Kind != Delete || ops[2].Kind != Insert {
		t.Errorf("%d ops (%v ...), want the middle replaced whole", len(ops), ops[:min(len(ops), 4)])
	}
	// Within the budget the diff is still minimal.
	b = append([]string(nil), a...)
	for i := 100; i < len(b); i += 100 {
		b[i] = "changed\n"
	}
	if ops := DiffLines(a, b); len(ops) != 3*299+1 {
		t.Errorf("299 changed lines: %d ops, want %d", len(ops), 3*299+1)
	}
}
