package publish

import (
	"math/rand"
	"strings"
	"testing"
)

func lines(s string) []string { return SplitLines([]byte(s)) }

func join(ls []string) string { return strings.Join(ls, "") }

func TestMerge3Cases(t *testing.T) {
	base := "a\nb\nc\nd\ne\n"
	for _, c := range []struct {
		name, ours, head, want string
		conflicts              int
	}{
		{"disjoint", "A\nb\nc\nd\ne\n", "a\nb\nc\nd\nE\n", "A\nb\nc\nd\nE\n", 0},
		{"same change", "a\nB\nc\nd\ne\n", "a\nB\nc\nd\ne\n", "a\nB\nc\nd\ne\n", 0},
		{"overlap", "a\nX\nc\nd\ne\n", "a\nY\nc\nd\ne\n", "a\nY\nc\nd\ne\n", 1},
		{"insert vs edit next line", "a\nnew\nb\nc\nd\ne\n", "a\nB\nc\nd\ne\n", "a\nnew\nB\nc\nd\ne\n", 0},
		{"both insert same place", "a\nx\nb\nc\nd\ne\n", "a\ny\nb\nc\nd\ne\n", "a\ny\nb\nc\nd\ne\n", 1},
		{"delete vs edit", "a\nc\nd\ne\n", "a\nB\nc\nd\ne\n", "a\nB\nc\nd\ne\n", 1},
		{"ours only", "a\nb\nc\nd\ne\nf\n", base, "a\nb\nc\nd\ne\nf\n", 0},
		{"adjacent edits", "A\nB\nc\nd\ne\n", "a\nb\nC\nD\ne\n", "A\nB\nC\nD\ne\n", 0},
		{"no final newline vs append", "a\nb\nc\nd\ne", "a\nb\nc\nd\ne\nf\n", "a\nb\nc\nd\ne\nf\n", 1},
		{"append vs no final newline", "a\nb\nc\nd\ne\nf\n", "a\nb\nc\nd\ne", "a\nb\nc\nd\ne", 1},
		{"no final newline vs edit above", "a\nB\nc\nd\ne", "A\nb\nc\nd\ne\n", "A\nB\nc\nd\ne", 0},
	} {
		m := Merge3(lines(base), lines(c.ours), lines(c.head))
		if got := join(m.Lines); got != c.want || len(m.Conflicts) != c.conflicts {
			t.Errorf("%s: got %q with %d conflicts, want %q with %d", c.name, got, len(m.Conflicts), c.want, c.conflicts)
		}
	}
}

func TestMerge3Markers(t *testing.T) {
	m := Merge3(lines("1\n2\n3\n"), lines("1\nours\n3\n"), lines("1\nhead\n3\n"))
	want := "1\n<<<<<<< ours\nours\n||||||| base\n2\n=======\nhead\n>>>>>>> head abc123\n3\n"
	if got := join(m.WithMarkers("abc123")); got != want {
		t.Errorf("markers:\n%s\nwant\n%s", got, want)
	}
}

func TestMerge3Sources(t *testing.T) {
	base, ours, head := lines("a\nb\nc\n"), lines("a\nb\nc\nours\n"), lines("head\na\nb\nc\n")
	m := Merge3(base, ours, head)
	if join(m.Lines) != "head\na\nb\nc\nours\n" {
		t.Fatalf("lines %q", join(m.Lines))
	}
	for i, src := range m.Sources {
		version := head
		if src.Side == FromOurs {
			version = ours
		}
		if version[src.Index] != m.Lines[i] {
			t.Errorf("line %d %q: source %+v holds %q", i, m.Lines[i], src, version[src.Index])
		}
	}
	if m.Sources[0].Side != FromHead || m.Sources[4].Side != FromOurs {
		t.Errorf("sources %+v", m.Sources)
	}
}

// edit applies a few random local edits to base.
func edit(r *rand.Rand, base []string) []string {
	out := append([]string(nil), base...)
	for k := r.Intn(4); k >= 0; k-- {
		at := r.Intn(len(out) + 1)
		del := r.Intn(3)
		if at+del > len(out) {
			del = len(out) - at
		}
		ins := make([]string, r.Intn(3))
		for i := range ins {
			ins[i] = string(rune('k'+r.Intn(10))) + "\n"
		}
		out = append(out[:at], append(ins, out[at+del:]...)...)
	}
	if n := len(out); n > 0 && r.Intn(5) == 0 { // the file loses its final newline
		out[n-1] = strings.TrimSuffix(out[n-1], "\n")
	}
	return out
}

func TestMerge3Properties(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for i := 0; i < 2000; i++ {
		base := randomLines(r, r.Intn(30))
		checkMergeProperties(t, base, edit(r, base), edit(r, base))
	}
}

// checkMergeProperties: merging a change with itself, or with no change,
// gives the change; a clean merge does not depend on which side is ours;
// conflict regions cover exactly the spans both sides changed differently.
func checkMergeProperties(t *testing.T, base, a, b []string) {
	t.Helper()
	if m := Merge3(base, a, a); !m.Clean() || join(m.Lines) != join(a) {
		t.Fatalf("merge with itself: %q", join(m.Lines))
	}
	if m := Merge3(base, a, base); !m.Clean() || join(m.Lines) != join(a) {
		t.Fatalf("merge with no change (head): %q", join(m.Lines))
	}
	if m := Merge3(base, base, a); !m.Clean() || join(m.Lines) != join(a) {
		t.Fatalf("merge with no change (ours): %q", join(m.Lines))
	}
	ab, ba := Merge3(base, a, b), Merge3(base, b, a)
	for _, m := range []*Merged{ab, ba} {
		for k, l := range m.Lines[:max(len(m.Lines)-1, 0)] {
			if !strings.HasSuffix(l, "\n") {
				t.Fatalf("merged line %d %q has no newline but is not last: two lines joined\nbase %q\na %q\nb %q", k, l, join(base), join(a), join(b))
			}
		}
	}
	if ab.Clean() != ba.Clean() || len(ab.Conflicts) != len(ba.Conflicts) {
		t.Fatalf("conflicts depend on the side: %d vs %d\nbase %q\na %q\nb %q", len(ab.Conflicts), len(ba.Conflicts), join(base), join(a), join(b))
	}
	if ab.Clean() && join(ab.Lines) != join(ba.Lines) {
		t.Fatalf("clean merge depends on the side: %q vs %q\nbase %q\na %q\nb %q", join(ab.Lines), join(ba.Lines), join(base), join(a), join(b))
	}
	checkConflictRegions(t, base, a, b, ab)
}

func checkConflictRegions(t *testing.T, base, ours, head []string, m *Merged) {
	t.Helper()
	ho, hh := changesOf(base, ours, FromOurs), changesOf(base, head, FromHead)
	inRegion := func(c change) bool {
		for _, r := range m.Conflicts {
			if c.start >= r.BaseStart && c.end <= r.BaseEnd {
				return true
			}
		}
		return false
	}
	for _, o := range ho {
		for _, h := range hh {
			if !overlaps(o, h) {
				continue
			}
			same := equalLines(ours[o.nstart:o.nend], head[h.nstart:h.nend]) && o.start == h.start && o.end == h.end
			if !same && !inRegion(o) {
				t.Fatalf("overlapping changes at base %d-%d / %d-%d outside every conflict region", o.start, o.end, h.start, h.end)
			}
		}
	}
	for _, r := range m.Conflicts {
		if equalLines(r.Ours, r.Head) {
			t.Fatalf("conflict region %d-%d with equal sides", r.BaseStart, r.BaseEnd)
		}
		found := false
		for _, o := range ho {
			for _, h := range hh {
				if overlaps(o, h) && o.start >= r.BaseStart && o.end <= r.BaseEnd && h.start >= r.BaseStart && h.end <= r.BaseEnd {
					found = true
				}
			}
		}
		if !found {
			t.Fatalf("conflict region %d-%d without overlapping changes", r.BaseStart, r.BaseEnd)
		}
	}
}

func FuzzMerge3(f *testing.F) {
	f.Add("a\nb\nc\n", "a\nB\nc\n", "a\nb\nC\n")
	f.Add("a\nb\n", "x\n", "y\n")
	f.Add("", "x\n", "")
	f.Fuzz(func(t *testing.T, base, a, b string) {
		checkMergeProperties(t, lines(base), lines(a), lines(b))
	})
}
