package publish

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/sergi/go-diff/diffmatchpatch"
)

// OpKind is what a run of lines did between two versions.
type OpKind int

const (
	Equal OpKind = iota
	Delete
	Insert
)

// LineOp is a run of N lines: equal in both versions (starting at line A
// of the old and B of the new, 0-based), deleted from the old at A, or
// inserted into the new at B.
type LineOp struct {
	Kind OpKind
	A, B int
	N    int
}

// SplitLines cuts text into lines, each keeping its "\n"; the last line may
// lack one.
func SplitLines(data []byte) []string {
	if len(data) == 0 {
		return nil
	}
	lines := strings.SplitAfter(string(data), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// DiffLines computes a minimal line diff of a and b (Myers, through
// go-diff's line mode: each distinct line becomes one rune), or, past
// diffBudget, one that replaces what lies between their common head and
// tail whole.
func DiffLines(a, b []string) []LineOp {
	ra, rb, ok := encodeLines(a, b)
	if !ok {
		return diffManyLines(a, b)
	}
	return diffRunes(ra, rb)
}

// diffBudget bounds the work of one diff. Myers takes about (n+m)·D steps
// for versions of n and m lines D edits apart, and go-diff ~2 ns a step: a
// shuffled file of 40k lines took 14 s, of 200k lines most of an hour, in
// a commit's blame or a merge (under the write lock, if head moved). Past
// the budget the diff is longer than a minimal one, never wrong, and the
// same for the same versions: a merge must not depend on timing.
const diffBudget = 1 << 29

func diffRunes(ra, rb []rune) []LineOp {
	pre, suf := commonEnds(ra, rb)
	// D is at most n: only a long middle can be over budget.
	if n := len(ra) + len(rb) - 2*(pre+suf); n > 0 && diffBudget/n < n && !editsWithin(ra[pre:len(ra)-suf], rb[pre:len(rb)-suf], diffBudget/n) {
		return replaceMiddle(len(ra), len(rb), pre, suf)
	}
	dmp := diffmatchpatch.New()
	dmp.DiffTimeout = 0 // exact, however long: merges must not depend on timing
	var ops []LineOp
	i, j := 0, 0
	for _, d := range dmp.DiffMainRunes(ra, rb, false) {
		n := len([]rune(d.Text))
		switch d.Type {
		case diffmatchpatch.DiffEqual:
			ops = append(ops, LineOp{Equal, i, j, n})
			i, j = i+n, j+n
		case diffmatchpatch.DiffDelete:
			ops = append(ops, LineOp{Delete, i, j, n})
			i += n
		case diffmatchpatch.DiffInsert:
			ops = append(ops, LineOp{Insert, i, j, n})
			j += n
		}
	}
	return ops
}

// editsWithin reports whether a and b are at most limit inserted and deleted
// lines apart: Myers' greedy forward pass, stopped at limit, which costs at
// most about (n+m)·limit steps.
func editsWithin(a, b []rune, limit int) bool {
	n, m := len(a), len(b)
	if n-m > limit || m-n > limit {
		return false
	}
	off := limit + 1
	v := make([]int, 2*limit+3) // v[off+k]: the furthest x on diagonal k = x-y
	for d := 0; d <= limit; d++ {
		for k := -d; k <= d; k += 2 {
			x := v[off+k+1] // down, from diagonal k+1
			if k != -d && (k == d || v[off+k-1] >= v[off+k+1]) {
				x = v[off+k-1] + 1 // right, from diagonal k-1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x, y = x+1, y+1
			}
			v[off+k] = x
			if x >= n && y >= m {
				return true
			}
		}
	}
	return false
}

// commonEnds returns how many lines a and b share at their start, and then
// at their end.
func commonEnds[T comparable](a, b []T) (pre, suf int) {
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	return pre, suf
}

// replaceMiddle is the diff of versions of n and m lines that share pre
// lines at their start and suf at their end and nothing is known of
// between: the rest of the first deleted, the rest of the second inserted.
func replaceMiddle(n, m, pre, suf int) []LineOp {
	var ops []LineOp
	if pre > 0 {
		ops = append(ops, LineOp{Equal, 0, 0, pre})
	}
	if n > pre+suf {
		ops = append(ops, LineOp{Delete, pre, pre, n - pre - suf})
	}
	if m > pre+suf {
		ops = append(ops, LineOp{Insert, n - suf, pre, m - pre - suf})
	}
	if suf > 0 {
		ops = append(ops, LineOp{Equal, n - suf, m - suf, suf})
	}
	return ops
}

// encodeLines maps each distinct line to one rune, skipping the surrogate
// range, which is not a valid rune. It fails when there are more distinct
// lines than runes: go-diff turns runes into strings, where every rune past
// the last valid one reads as the same U+FFFD, and lines that differ would
// diff as equal.
func encodeLines(a, b []string) ([]rune, []rune, bool) {
	ids := map[string]rune{}
	next := rune(1)
	enc := func(lines []string) []rune {
		out := make([]rune, len(lines))
		for i, l := range lines {
			r, ok := ids[l]
			if !ok {
				if next == 0xD800 {
					next = 0xE000
				}
				r, next = next, next+1
				ids[l] = r
			}
			out[i] = r
		}
		return out
	}
	ra, rb := enc(a), enc(b)
	return ra, rb, next-1 <= utf8.MaxRune
}

// diffManyLines diffs versions with more distinct lines than runes: the
// part between their common head and tail is diffed as runes when it fits,
// else replaced whole — a longer diff than a minimal one, never a wrong one.
func diffManyLines(a, b []string) []LineOp {
	pre, suf := commonEnds(a, b)
	ra, rb, ok := encodeLines(a[pre:len(a)-suf], b[pre:len(b)-suf])
	if !ok {
		return replaceMiddle(len(a), len(b), pre, suf)
	}
	var ops []LineOp
	if pre > 0 {
		ops = append(ops, LineOp{Equal, 0, 0, pre})
	}
	for _, op := range diffRunes(ra, rb) {
		op.A, op.B = op.A+pre, op.B+pre
		ops = append(ops, op)
	}
	if suf > 0 {
		ops = append(ops, LineOp{Equal, len(a) - suf, len(b) - suf, suf})
	}
	return ops
}

// Unified renders a diff of a and b in unified format with context lines
// of context around each change; "" when they are equal.
func Unified(nameA, nameB string, a, b []string, context int) string {
	ops := DiffLines(a, b)
	var sb strings.Builder
	for _, h := range hunks(ops, context) {
		if sb.Len() == 0 {
			fmt.Fprintf(&sb, "--- %s\n+++ %s\n", nameA, nameB)
		}
		writeHunk(&sb, h, a, b)
	}
	return sb.String()
}

type hunk struct{ ops []LineOp }

// hunks groups changes whose context overlaps, trimming equal runs to
// context lines on each side.
func hunks(ops []LineOp, context int) []hunk {
	var out []hunk
	var cur []LineOp
	for i, op := range ops {
		if op.Kind != Equal {
			cur = append(cur, op)
			continue
		}
		first, last := len(cur) == 0, i == len(ops)-1
		switch {
		case first:
			skip := max(0, op.N-context)
			if op.N > 0 && op.N-skip > 0 && i < len(ops)-1 {
				cur = append(cur, LineOp{Equal, op.A + skip, op.B + skip, op.N - skip})
			}
		case last || op.N > 2*context:
			cur = append(cur, LineOp{Equal, op.A, op.B, min(op.N, context)})
			out = append(out, hunk{cur})
			cur = nil
			if !last {
				skip := op.N - context
				cur = append(cur, LineOp{Equal, op.A + skip, op.B + skip, context})
			}
		default:
			cur = append(cur, op)
		}
	}
	if hasChange(cur) {
		out = append(out, hunk{cur})
	}
	return out
}

func hasChange(ops []LineOp) bool {
	for _, op := range ops {
		if op.Kind != Equal {
			return true
		}
	}
	return false
}

func writeHunk(sb *strings.Builder, h hunk, a, b []string) {
	first := h.ops[0]
	var na, nb int
	for _, op := range h.ops {
		if op.Kind != Insert {
			na += op.N
		}
		if op.Kind != Delete {
			nb += op.N
		}
	}
	fmt.Fprintf(sb, "@@ -%s +%s @@\n", hunkRange(first.A, na), hunkRange(first.B, nb))
	for _, op := range h.ops {
		switch op.Kind {
		case Equal:
			writeLines(sb, " ", a[op.A:op.A+op.N])
		case Delete:
			writeLines(sb, "-", a[op.A:op.A+op.N])
		case Insert:
			writeLines(sb, "+", b[op.B:op.B+op.N])
		}
	}
}

func hunkRange(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	if n == 1 {
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

func writeLines(sb *strings.Builder, prefix string, lines []string) {
	for _, l := range lines {
		sb.WriteString(prefix)
		sb.WriteString(l)
		if !strings.HasSuffix(l, "\n") {
			sb.WriteString("\n\\ No newline at end of file\n")
		}
	}
}
