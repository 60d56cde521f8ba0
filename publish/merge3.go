package publish

import "fmt"

// Side says where a merged line came from.
type Side uint8

const (
	FromHead Side = iota // head's version: unchanged text and head's changes
	FromOurs             // the change being published
)

// Source names one merged line: its side and its index in that side's
// version, so blame can keep the line's owner.
type Source struct {
	Side  Side
	Index int
}

// ConflictRegion is a span of base that both sides changed differently.
type ConflictRegion struct {
	BaseStart, BaseEnd int      // in base lines, half-open
	Base, Ours, Head   []string // each side's text for the span
}

// Merged is the result of a three-way line merge.
type Merged struct {
	Lines     []string
	Sources   []Source // one per line
	Conflicts []ConflictRegion
	at        []int // where each conflict's head text starts in Lines
}

// Clean reports whether the merge had no overlapping changes.
func (m *Merged) Clean() bool { return len(m.Conflicts) == 0 }

// change is one change of a side against base: base lines [start, end)
// replaced by lines [nstart, nend) of that side. open marks a change that
// leaves the side's file without a final newline: its text must stay
// last.
type change struct {
	start, end   int
	nstart, nend int
	side         Side
	open         bool
}

func changesOf(base, other []string, side Side) []change {
	var out []change
	for _, op := range DiffLines(base, other) {
		switch op.Kind {
		case Delete:
			out = appendChange(out, change{start: op.A, end: op.A + op.N, nstart: op.B, nend: op.B, side: side})
		case Insert:
			out = appendChange(out, change{start: op.A, end: op.A, nstart: op.B, nend: op.B + op.N, side: side})
		}
	}
	if n := len(out); n > 0 {
		last := &out[n-1]
		last.open = last.nend > last.nstart && last.nend == len(other) && !terminatedLine(other[last.nend-1])
	}
	return out
}

func terminatedLine(l string) bool { return len(l) > 0 && l[len(l)-1] == '\n' }

// appendChange joins a change adjacent to the previous one (a delete
// followed by an insert at the same place is one replacement).
func appendChange(hs []change, h change) []change {
	if n := len(hs); n > 0 && hs[n-1].end == h.start && hs[n-1].nend == h.nstart {
		hs[n-1].end, hs[n-1].nend = h.end, h.nend
		return hs
	}
	return append(hs, h)
}

// overlaps reports whether two changes touch the same base lines: their
// spans intersect, or both insert at the same place, or one ends its
// side's file without a final newline where the other appends (merged,
// the two would join into a line neither side wrote).
func overlaps(a, b change) bool {
	if (a.open && b.start == a.end) || (b.open && a.start == b.end) {
		return true
	}
	if a.start == a.end && b.start == b.end {
		return a.start == b.start
	}
	if a.start == a.end {
		return a.start > b.start && a.start < b.end
	}
	if b.start == b.end {
		return b.start > a.start && b.start < a.end
	}
	return a.start < b.end && b.start < a.end
}

// Merge3 merges two descendants of base line by line. Changes to disjoint
// spans of base both apply; a span both sides changed the same way applies
// once; a span they changed differently is a conflict, reported with each
// side's text. Where a conflict stands, Lines holds head's version.
func Merge3(base, ours, head []string) *Merged {
	ho, hh := changesOf(base, ours, FromOurs), changesOf(base, head, FromHead)
	m := &Merged{}
	pos := 0 // next base line to copy
	i, j := 0, 0
	for i < len(ho) || j < len(hh) {
		group, ni, nj := nextGroup(ho, hh, i, j)
		i, j = ni, nj
		start, end := spanOf(group)
		m.copyBase(base, head, hh, pos, start)
		m.resolve(group, base, ours, head, start, end)
		pos = end
	}
	m.copyBase(base, head, hh, pos, len(base))
	return m
}

// nextGroup takes the earliest change and every change of either side that
// overlaps the growing group.
func nextGroup(ho, hh []change, i, j int) ([]change, int, int) {
	var group []change
	take := func() {
		if j >= len(hh) || (i < len(ho) && before(ho[i], hh[j])) {
			group, i = append(group, ho[i]), i+1
		} else {
			group, j = append(group, hh[j]), j+1
		}
	}
	take()
	for grew := true; grew; {
		grew = false
		for _, next := range []struct {
			hs  []change
			idx *int
		}{{ho, &i}, {hh, &j}} {
			for *next.idx < len(next.hs) && overlapsAny(next.hs[*next.idx], group) {
				group = append(group, next.hs[*next.idx])
				*next.idx++
				grew = true
			}
		}
	}
	return group, i, j
}

// before orders changes by where they start in base; at the same place an
// insertion goes first, whichever side made it, so the merge does not
// depend on which side is ours.
func before(a, b change) bool {
	if a.start != b.start {
		return a.start < b.start
	}
	return a.start == a.end || b.start != b.end
}

func overlapsAny(h change, group []change) bool {
	for _, g := range group {
		if overlaps(h, g) {
			return true
		}
	}
	return false
}

func spanOf(group []change) (int, int) {
	start, end := group[0].start, group[0].end
	for _, h := range group[1:] {
		start, end = min(start, h.start), max(end, h.end)
	}
	return start, end
}

// copyBase copies base lines [from, to), unchanged on both sides, as head
// has them.
func (m *Merged) copyBase(base, head []string, hh []change, from, to int) {
	for b := from; b < to; b++ {
		m.add(base[b], Source{FromHead, headIndex(hh, b)})
	}
}

// headIndex maps an unchanged base line to its index in head.
func headIndex(hh []change, b int) int {
	shift := 0
	for _, h := range hh {
		if h.end > b {
			break
		}
		shift += (h.nend - h.nstart) - (h.end - h.start)
	}
	return b + shift
}

func (m *Merged) add(line string, src Source) {
	m.Lines = append(m.Lines, line)
	m.Sources = append(m.Sources, src)
}

// resolve merges one group of overlapping hunks spanning base [start, end).
func (m *Merged) resolve(group []change, base, ours, head []string, start, end int) {
	oursText, oursAt := sideText(group, FromOurs, base, ours, start, end)
	headText, headAt := sideText(group, FromHead, base, head, start, end)
	onlyOurs, onlyHead := !hasSide(group, FromHead), !hasSide(group, FromOurs)
	switch {
	case onlyOurs:
		m.addSide(oursText, FromOurs, oursAt)
	case onlyHead || equalLines(oursText, headText):
		m.addSide(headText, FromHead, headAt)
	default:
		m.Conflicts = append(m.Conflicts, ConflictRegion{BaseStart: start, BaseEnd: end,
			Base: base[start:end], Ours: oursText, Head: headText})
		m.at = append(m.at, len(m.Lines))
		m.addSide(headText, FromHead, headAt)
	}
}

func (m *Merged) addSide(lines []string, side Side, at int) {
	for k, l := range lines {
		m.add(l, Source{side, at + k})
	}
}

// sideText is one side's version of base [start, end): its own hunks
// there, with base lines between them; and where that text starts in the
// side's version.
func sideText(group []change, side Side, base, version []string, start, end int) ([]string, int) {
	var hs []change
	for _, h := range group {
		if h.side == side {
			hs = append(hs, h)
		}
	}
	if len(hs) == 0 {
		return base[start:end], -1
	}
	// hs are sorted and disjoint: the side's text starts where its first
	// change starts, shifted back over the base lines before it.
	from := hs[0].nstart - (hs[0].start - start)
	last := hs[len(hs)-1]
	to := last.nend + (end - last.end)
	return version[from:to], from
}

func hasSide(group []change, side Side) bool {
	for _, h := range group {
		if h.side == side {
			return true
		}
	}
	return false
}

func equalLines(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Marker lines, in git's diff3 style.
const (
	markerOurs  = "<<<<<<< ours\n"
	markerBase  = "||||||| base\n"
	markerSplit = "=======\n"
	markerHead  = ">>>>>>> head "
)

// WithMarkers renders the merge with a marker block in place of each
// conflict: ours, base, head (named by its commit id).
func (m *Merged) WithMarkers(head string) []string {
	var out []string
	n := 0
	for c, r := range m.Conflicts {
		at := m.at[c]
		out = append(out, m.Lines[n:at]...)
		out = append(out, markerOurs)
		out = append(out, terminated(r.Ours)...)
		out = append(out, markerBase)
		out = append(out, terminated(r.Base)...)
		out = append(out, markerSplit)
		out = append(out, terminated(r.Head)...)
		out = append(out, fmt.Sprintf("%s%s\n", markerHead, head))
		n = at + len(r.Head)
	}
	return append(out, m.Lines[n:]...)
}

// terminated ends every line with a newline, so markers stay on lines of
// their own.
func terminated(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		if len(l) == 0 || l[len(l)-1] != '\n' {
			l += "\n"
		}
		out[i] = l
	}
	return out
}
