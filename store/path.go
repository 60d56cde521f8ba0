package store

import (
	"errors"
	"fmt"
	"strings"

	"github.com/layerfs/layerfs/object"
)

// ErrBadPath: a path is not relative, slash-separated and clean, or too
// long, or not what the call needs (a file, say); the error's text says
// which.
var ErrBadPath = errors.New("bad path")

// MaxPath is the longest path a change may have: Linux's PATH_MAX less its
// NUL, past which a path cannot be opened whole (an export would fail
// there).
const MaxPath = 4095

// SplitPath checks a path inside a tree and returns its components. "" and
// "." name the root and give no components.
func SplitPath(p string) ([]string, error) {
	if p == "" || p == "." {
		return nil, nil
	}
	if strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("path %q is absolute: %w", p, ErrBadPath)
	}
	parts := strings.Split(p, "/")
	for _, name := range parts {
		if name == "" || name == "." || name == ".." {
			return nil, fmt.Errorf("path %q has an empty, '.' or '..' component: %w", p, ErrBadPath)
		}
		if err := CheckName(name); err != nil {
			return nil, fmt.Errorf("path %q: %v: %w", p, err, ErrBadPath)
		}
	}
	return parts, nil
}

// RootEntry describes a commit's root directory as an Entry.
func RootEntry(tree object.ID) Entry {
	return Entry{Type: TypeDir, Mode: 0755, ID: tree}
}

// Lookup finds the entry at path p below the tree root, reading one tree
// per path component: O(depth), whatever the history.
func (s *Store) Lookup(root object.ID, p string) (Entry, error) {
	parts, err := SplitPath(p)
	if err != nil {
		return Entry{}, err
	}
	cur := RootEntry(root)
	for i, name := range parts {
		if cur.Type != TypeDir {
			return Entry{}, fmt.Errorf("%s: %s is not a directory: %w", p, strings.Join(parts[:i], "/"), ErrNotFound)
		}
		t, err := s.Tree(cur.ID)
		if err != nil {
			return Entry{}, fmt.Errorf("%s: %w", p, err)
		}
		e, ok := t.Lookup(name)
		if !ok {
			return Entry{}, fmt.Errorf("%s: %w", p, ErrNotFound)
		}
		cur = *e
	}
	return cur, nil
}

// CommitRoot returns the root tree of the commit a ref names.
func (s *Store) CommitRoot(ref string) (object.ID, Resolved, error) {
	r, err := s.Resolve(ref)
	if err != nil {
		return object.Zero, r, err
	}
	c, err := s.Commit(r.Commit)
	if err != nil {
		return object.Zero, r, err
	}
	return c.Tree, r, nil
}
