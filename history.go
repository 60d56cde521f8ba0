package layerfs

import (
	"fmt"
	"strings"
	"time"

	"github.com/layerfs/layerfs/extents"
	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/publish"
	"github.com/layerfs/layerfs/store"
)

// LogEntry is one Commit in a history.
type LogEntry struct {
	Commit  object.ID          `json:"-"`
	Parents []object.ID        `json:"-"`
	Origin  string             `json:"origin"`
	Message string             `json:"message"`
	Time    time.Time          `json:"time"`
	Changes []publish.PathDiff `json:"changes"`
}

// Log lists ref's history along first parents, newest first, with the
// paths each Commit changed; max bounds the count (0: all).
func (st *Store) Log(ref string, max int) ([]LogEntry, error) {
	r, err := st.s.Resolve(ref)
	if err != nil {
		return nil, err
	}
	var out []LogEntry
	for id := r.Commit; !id.IsZero() && (max <= 0 || len(out) < max); {
		c, err := st.s.Commit(id)
		if err != nil {
			return out, err // the entries before it stand
		}
		e := LogEntry{Commit: id, Parents: c.Parents, Origin: c.Origin, Message: c.Message, Time: c.When()}
		parentTree := object.Zero
		id = object.Zero
		if len(c.Parents) > 0 {
			id = c.Parents[0]
			p, err := st.s.Commit(id)
			if err != nil {
				return out, err
			}
			parentTree = p.Tree
		}
		if e.Changes, err = publish.DiffTrees(st.s, parentTree, c.Tree); err != nil {
			return out, err
		}
		out = append(out, e)
	}
	return out, nil
}

// Diff lists the paths that differ from refA to refB. Its cost follows the
// change, not the tree.
// With paths, only changes at or below one of them are listed.
func (st *Store) Diff(refA, refB string, paths ...string) ([]publish.PathDiff, error) {
	a, _, err := st.s.CommitRoot(refA)
	if err != nil {
		return nil, err
	}
	b, _, err := st.s.CommitRoot(refB)
	if err != nil {
		return nil, err
	}
	paths = append([]string(nil), paths...) // the caller's stay as they are
	for i, p := range paths {
		parts, err := store.SplitPath(strings.TrimSuffix(p, "/"))
		if err != nil {
			return nil, err
		}
		paths[i] = strings.Join(parts, "/") // "" for the root ("." too)
	}
	all, err := publish.DiffTrees(st.s, a, b)
	if err != nil || len(paths) == 0 {
		return all, err
	}
	var out []publish.PathDiff
	for _, c := range all {
		for _, p := range paths {
			if p == "" || c.Path == p || strings.HasPrefix(c.Path, p+"/") {
				out = append(out, c)
				break
			}
		}
	}
	return out, nil
}

// DiffText renders the changes from refA to refB as unified diffs, with
// context lines around each change; binary files are named, not shown.
func (st *Store) DiffText(refA, refB string, context int, paths ...string) (string, error) {
	changes, err := st.Diff(refA, refB, paths...)
	if err != nil {
		return "", err
	}
	var sb strings.Builder
	for _, c := range changes {
		if err := st.diffOne(&sb, &c, context); err != nil {
			return "", err
		}
	}
	return sb.String(), nil
}

func (st *Store) diffOne(sb *strings.Builder, c *publish.PathDiff, context int) error {
	a, err := st.textOf(c.Old, c.Path)
	if err != nil {
		return err
	}
	b, err := st.textOf(c.New, c.Path)
	if err != nil {
		return err
	}
	// Names that need it are quoted as git quotes them, so a name holding
	// a newline cannot end the header or pass for a diff line.
	nameA, nameB := QuotePath("a/"+c.Path), QuotePath("b/"+c.Path)
	// Every file's part starts with the same header, binary or not, so a
	// reader splits the output by it, as git's "diff --git" lines.
	fmt.Fprintf(sb, "diff --layerfs %s %s (%s)\n", nameA, nameB, c.Kind)
	if c.Old != nil && c.New != nil && c.Old.Type == c.New.Type && c.Old.Mode != c.New.Mode {
		// As git says it; otherwise a chmod shows as a header alone.
		fmt.Fprintf(sb, "old mode %06o\nnew mode %06o\n", gitMode(c.Old), gitMode(c.New))
	}
	if c.Old == nil {
		nameA = "/dev/null"
	}
	if c.New == nil {
		nameB = "/dev/null"
	}
	switch {
	case a == nil || b == nil:
		fmt.Fprintf(sb, "Binary files %s and %s differ\n", nameA, nameB)
	default:
		sb.WriteString(publish.Unified(nameA, nameB, a, b, context))
	}
	return nil
}

// gitMode is an entry's type and mode as git prints them (100644).
func gitMode(e *store.Entry) uint32 {
	switch e.Type {
	case store.TypeDir:
		return 0o40000 | e.Mode
	case store.TypeSymlink:
		return 0o120000 | e.Mode
	}
	return 0o100000 | e.Mode
}

// textOf returns the lines of a file or symlink entry, an empty text for
// nil or a directory, and nil for binary content.
func (st *Store) textOf(e *store.Entry, p string) ([]string, error) {
	if e == nil || e.Type == store.TypeDir {
		return []string{}, nil
	}
	if e.Type == store.TypeFile && e.Size > textProbe {
		// A binary file is only named: read no more of it than tells.
		head := make([]byte, textProbe)
		if _, err := extents.NewReader(st.s, extents.File{ID: e.ID, Size: e.Size}).ReadAt(head, 0); err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		if !IsText(head) {
			return nil, nil
		}
	}
	data, err := readEntry(st.s, e, p)
	if err != nil {
		return nil, err
	}
	if !IsText(data) {
		return nil, nil
	}
	lines := publish.SplitLines(data)
	if lines == nil {
		lines = []string{}
	}
	return lines, nil
}

// Blame says which origin wrote each line of path at ref.
func (st *Store) Blame(ref, path string) (*publish.BlameResult, error) {
	root, r, err := st.s.CommitRoot(ref)
	if err != nil {
		return nil, err
	}
	return publish.Blame(st.s, root, r.Commit, path)
}

// Reset moves branch to the commit ref names. Commits after it stay in the
// Store and stay reachable by id.
func (st *Store) Reset(branch, ref string) (object.ID, error) {
	r, err := st.s.Resolve(ref)
	if err != nil {
		return object.Zero, err
	}
	err = st.s.Update(func(tx *store.RefTx) error {
		head, err := tx.Head(branch)
		if err != nil {
			return err
		}
		return tx.SetHead(branch, head, r.Commit)
	})
	if err != nil {
		return object.Zero, fmt.Errorf("reset %s to %s: %w", branch, ref, err)
	}
	return r.Commit, nil
}

// Fork makes branch name start at from: one record, no copies.
func (st *Store) Fork(name, from string) (store.Branch, error) {
	return st.s.Fork(name, from)
}
