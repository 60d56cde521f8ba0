package publish

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/layerfs/layerfs/extents"
	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// maxBlameBytes: larger files get whole-file ownership, like binary ones,
// so recording blame never costs more than a bounded read per file.
const maxBlameBytes = 8 << 20

// Range is lines Start..End (1-based, inclusive) with one owner.
type Range struct {
	Start int    `json:"start"`
	End   int    `json:"end"`
	Owner string `json:"owner"`
}

// BlameResult is the ownership of every line of one file.
type BlameResult struct {
	Path   string   `json:"path"`
	Binary bool     `json:"binary"`
	Ranges []Range  `json:"ranges"`
	Lines  []string `json:"-"`
}

// Blame says which origin wrote each line of path in tree root, the tree
// of Commit at (zero if it is no Commit's). Its cost follows the file, not
// the history: one audit row, or the init tree (or, where the row is not
// written yet, a walk back to the Commit that made the content).
func Blame(s *store.Store, root, at object.ID, path string) (*BlameResult, error) {
	e, err := s.Lookup(root, path)
	if err != nil {
		return nil, err
	}
	if e.Type != store.TypeFile {
		return nil, fmt.Errorf("blame %s: not a file: %w", path, store.ErrBadPath)
	}
	v, err := loadVersion(s, &e)
	if err != nil {
		return nil, fmt.Errorf("blame %s: %w", path, err)
	}
	own, err := ownershipOf(s, s, path, &e, v, at)
	if err != nil {
		return nil, fmt.Errorf("blame %s: %w", path, err)
	}
	res := &BlameResult{Path: path, Binary: own.Binary, Lines: v.lines}
	line := 1
	for _, r := range own.Runs {
		res.Ranges = append(res.Ranges, Range{Start: line, End: line + r.Lines - 1, Owner: r.Owner})
		line += r.Lines
	}
	return res, nil
}

// versionReader reads stored versions and their owners: the Store, or
// the Store through its writer connection (store.WriterReads).
type versionReader interface {
	extents.Getter
	Blame(path string, content object.ID) ([]store.OwnerRow, error)
}

// version is one file's content as blame sees it.
type version struct {
	binary bool
	lines  []string
}

func (v *version) count() int {
	if v.binary {
		return 1
	}
	return len(v.lines)
}

func loadVersion(g extents.Getter, e *store.Entry) (*version, error) {
	text, ok, err := loadText(g, e)
	if err != nil || !ok {
		return &version{binary: true}, err
	}
	return &version{lines: SplitLines(text)}, nil
}

// loadText reads a version's bytes when blame reads it as text; ok is
// false when it is binary or too large.
func loadText(g extents.Getter, e *store.Entry) (text []byte, ok bool, err error) {
	if e.Size > maxBlameBytes {
		return nil, false, nil
	}
	data, err := readAll(g, e)
	if err != nil || !isText(data) {
		return nil, false, err
	}
	return data, true, nil
}

// sharesLine reports whether text has any of lines, looking its lines up
// in a set of those without splitting it: the version a write replaces in
// whole is read only to learn that.
func sharesLine(text []byte, lines []string) bool {
	set := make(map[string]struct{}, len(lines))
	for _, l := range lines {
		set[l] = struct{}{}
	}
	for len(text) > 0 {
		n := bytes.IndexByte(text, '\n') + 1
		if n == 0 {
			n = len(text)
		}
		if _, ok := set[string(text[:n])]; ok {
			return true
		}
		text = text[n:]
	}
	return false
}

// ownershipOf finds who owns each line of the content e holds at path: the
// recorded row, or "original" when init left that content there. With
// neither — the Commit that made the content landed, but its row is not
// written yet (it is recorded after the landing when head moved, or when
// the caller defers it) or was never written (a crash in between) — it is
// worked out from history, from at, a Commit whose tree holds e at path
// (zero: none known); "unknown" only if that fails too.
func ownershipOf(s *store.Store, rd versionReader, path string, e *store.Entry, v *version, at object.ID) (store.Ownership, error) {
	budget := maxHistoryWalk
	return ownershipWalk(s, rd, path, e, v, at, &budget)
}

// rowAt picks, of the ownerships recorded for a version (newest first),
// the one that holds in the history of Commit at: the row of the nearest
// Commit, at or behind at, that recorded one. The same content written
// elsewhere — on another branch, or back to what init left (orig) — must
// not rename the owners of what at holds. The usual case costs nothing
// more: one row, and no init content like it, is the one. Otherwise at's
// ancestors are walked (at most maxRowWalk), nearest first; if none of
// theirs is found, ok is false where init left the content (the caller
// says original) or where the walk saw all of at's history, else the
// newest row no newer than at stands.
func rowAt(s *store.Store, rows []store.OwnerRow, at object.ID, orig bool) (store.OwnerRow, bool, error) {
	switch {
	case len(rows) == 0:
		return store.OwnerRow{}, false, nil
	case at.IsZero() || len(rows) == 1 && !orig:
		return rows[0], true, nil
	}
	byCommit := make(map[object.ID]int, len(rows))
	for i := len(rows) - 1; i >= 0; i-- {
		byCommit[rows[i].Commit] = i // the newest row of a Commit
	}
	seen := map[object.ID]bool{at: true}
	queue := []object.ID{at}
	for n := 0; len(queue) > 0 && n < maxRowWalk; n++ {
		id := queue[0]
		queue = queue[1:]
		if i, ok := byCommit[id]; ok {
			return rows[i], true, nil
		}
		c, err := s.Commit(id)
		if err != nil {
			return store.OwnerRow{}, false, err
		}
		for _, p := range c.Parents {
			if !seen[p] {
				seen[p] = true
				queue = append(queue, p)
			}
		}
	}
	if orig || len(queue) == 0 {
		return store.OwnerRow{}, false, nil // none of them is in at's history
	}
	// The walk ran out: a guess by time, the newest row no newer than at.
	ac, err := s.Commit(at)
	if err != nil {
		return store.OwnerRow{}, false, err
	}
	for _, r := range rows {
		if c, err := s.Commit(r.Commit); err == nil && c.Time <= ac.Time {
			return r, true, nil
		}
	}
	return store.OwnerRow{}, false, nil
}

// maxRowWalk bounds the Commits rowAt reads to tell which of several rows
// holds.
const maxRowWalk = 256

// maxHistoryWalk bounds how many Commits one ownership lookup may read
// when rows are missing.
const maxHistoryWalk = 1000

func ownershipWalk(s *store.Store, rd versionReader, path string, e *store.Entry, v *version, at object.ID, budget *int) (store.Ownership, error) {
	rows, err := rd.Blame(path, e.ID)
	if err != nil {
		return store.Ownership{}, err
	}
	if len(rows) > 0 && at.IsZero() {
		return rows[0].Own, nil
	}
	// Whether init left this content here: the answer with no row that
	// holds, and what tells a lone row's case apart (rowAt).
	orig, err := fromInit(s, path, e.ID)
	if err != nil {
		return store.Ownership{}, err
	}
	if row, ok, err := rowAt(s, rows, at, orig); err != nil || ok {
		return row.Own, err
	}
	if orig {
		return uniform(v, store.OwnerOriginal), nil
	}
	if !at.IsZero() {
		own, ok, err := fromHistory(s, rd, path, e, v, at, budget)
		if err != nil || ok {
			return own, err
		}
	}
	return uniform(v, store.OwnerUnknown), nil
}

// fromHistory works out the ownership of the content e holds at path in
// Commit at's tree as its audit would have: it finds the Commit that made
// it, walking back through parents that hold it too, and carries the owners
// of the version that Commit replaced, crediting the lines it wrote to its
// origin. ok is false if the walk ran out of budget.
func fromHistory(s *store.Store, rd versionReader, path string, e *store.Entry, v *version, at object.ID, budget *int) (store.Ownership, bool, error) {
	if c, err := s.Commit(at); err != nil {
		return store.Ownership{}, false, err
	} else if ae, err := LookupEntry(s, c.Tree, path); err != nil || ae == nil || ae.ID != e.ID {
		return store.Ownership{}, false, err // at does not hold it: no walk
	}
	for {
		if *budget--; *budget < 0 {
			return store.Ownership{}, false, nil
		}
		c, err := s.Commit(at)
		if err != nil {
			return store.Ownership{}, false, err
		}
		var prev *store.Entry // the version the first parent had
		var prevAt object.ID
		next := object.Zero
		for i, p := range c.Parents {
			pc, err := s.Commit(p)
			if err != nil {
				return store.Ownership{}, false, err
			}
			pe, err := LookupEntry(s, pc.Tree, path)
			if err != nil {
				return store.Ownership{}, false, err
			}
			if pe != nil && pe.Type == store.TypeFile && pe.ID == e.ID {
				next = p // made further back
				break
			}
			if i == 0 && pe != nil && pe.Type == store.TypeFile {
				prev, prevAt = pe, p
			}
		}
		if !next.IsZero() {
			at = next
			continue
		}
		// c made it, from prev if its first parent had the path.
		if prev == nil || v.binary {
			return uniform(v, c.Origin), true, nil
		}
		text, ok, err := loadText(rd, prev)
		if err != nil {
			return store.Ownership{}, false, err
		}
		if !ok {
			return uniform(v, c.Origin), true, nil
		}
		ov := &version{lines: SplitLines(text)}
		old, err := ownershipWalk(s, rd, path, prev, ov, prevAt, budget)
		if err != nil {
			return store.Ownership{}, false, err
		}
		return attribute(old, ov, v, c.Origin), true, nil
	}
}

func uniform(v *version, owner string) store.Ownership {
	o := store.Ownership{Binary: v.binary}
	if n := v.count(); n > 0 {
		o.Runs = []store.Run{{Lines: n, Owner: owner}}
	}
	return o
}

// fromInit reports whether init (main's first Layer) left content id at path.
func fromInit(s *store.Store, path string, id object.ID) (bool, error) {
	root, err := s.InitTree()
	if err != nil || root.IsZero() {
		return false, err
	}
	e, err := s.Lookup(root, path)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil && e.Type == store.TypeFile && e.ID == id, err
}

// attribute computes the ownership of a new version from the old one:
// lines kept keep their owners; lines added belong to origin.
func attribute(old store.Ownership, ov, nv *version, origin string) store.Ownership {
	if ov == nil || ov.binary || nv.binary || disjoint(ov.lines, nv.lines) {
		return uniform(nv, origin)
	}
	return carryOwners(old, ov, nv, origin)
}

// carryOwners is attribute for text versions that share lines: a diff
// says which lines were kept.
func carryOwners(old store.Ownership, ov, nv *version, origin string) store.Ownership {
	owners := expand(old, len(ov.lines))
	next := make([]string, 0, len(nv.lines))
	for _, op := range DiffLines(ov.lines, nv.lines) {
		switch op.Kind {
		case Equal:
			next = append(next, owners[op.A:op.A+op.N]...)
		case Insert:
			for i := 0; i < op.N; i++ {
				next = append(next, origin)
			}
		}
	}
	return compress(next)
}

// disjoint reports whether a and b have no line in common: then every line
// of b is new, and no diff is needed (a Myers diff of two versions with
// nothing in common costs the product of their lengths).
func disjoint(a, b []string) bool {
	small, large := a, b
	if len(small) > len(large) {
		small, large = large, small
	}
	set := make(map[string]struct{}, len(small))
	for _, l := range small {
		set[l] = struct{}{}
	}
	for _, l := range large {
		if _, ok := set[l]; ok {
			return false
		}
	}
	return true
}

// expand lists one owner per line; lines beyond the recorded runs (which
// only a damaged row could cause) read unknown.
func expand(o store.Ownership, lines int) []string {
	out := make([]string, 0, lines)
	for _, r := range o.Runs {
		for i := 0; i < r.Lines && len(out) < lines; i++ {
			out = append(out, r.Owner)
		}
	}
	for len(out) < lines {
		out = append(out, store.OwnerUnknown)
	}
	return out
}

func compress(owners []string) store.Ownership {
	var o store.Ownership
	for _, w := range owners {
		if n := len(o.Runs); n > 0 && o.Runs[n-1].Owner == w {
			o.Runs[n-1].Lines++
			continue
		}
		o.Runs = append(o.Runs, store.Run{Lines: 1, Owner: w})
	}
	return o
}
