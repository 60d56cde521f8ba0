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

// Blame says which origin wrote each line of path in tree root. Its cost
// follows the file, not the history: one audit row, or the init tree.
func Blame(s *store.Store, root object.ID, path string) (*BlameResult, error) {
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
	own, err := ownershipOf(s, s, path, &e, v)
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
	Blame(path string, content object.ID) (store.Ownership, object.ID, bool, error)
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
// recorded row, or "original" when init left that content there, or
// "unknown" when the Commit that made it recorded nothing.
func ownershipOf(s *store.Store, rd versionReader, path string, e *store.Entry, v *version) (store.Ownership, error) {
	own, _, ok, err := rd.Blame(path, e.ID)
	if err != nil || ok {
		return own, err
	}
	owner := store.OwnerUnknown
	if orig, err := fromInit(s, path, e.ID); err != nil {
		return own, err
	} else if orig {
		owner = store.OwnerOriginal
	}
	return uniform(v, owner), nil
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
