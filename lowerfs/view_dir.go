package lowerfs

import (
	"fmt"

	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// ReadDir lists a directory: its entries sorted by name, with types, modes,
// sizes and times. The slice is shared and must not be modified. The trees
// of its subdirectories are read ahead: a listing is usually followed by
// visits to them (find, tar, cp -r, a compiler's search), and on a cold
// Store file that turns one disk wait per directory into a few in parallel.
func (v *View) ReadDir(dir store.Entry) ([]store.Entry, error) {
	t, err := v.tree(dir)
	if err != nil {
		return nil, err
	}
	v.prefetchSubtrees(t)
	return t.Entries, nil
}

// prefetchSubtrees queues the trees of t's subdirectories.
func (v *View) prefetchSubtrees(t *store.Tree) {
	if v.readAhead <= 0 {
		return
	}
	var batch []object.ID
	for i := range t.Entries {
		if t.Entries[i].Type != store.TypeDir {
			continue
		}
		if batch = append(batch, t.Entries[i].ID); len(batch) == prefetchBatch {
			v.g.c.pre.add(v.g, batch, object.KindTree)
			batch = nil
		}
	}
	if len(batch) > 0 {
		v.g.c.pre.add(v.g, batch, object.KindTree)
	}
}

// Lookup finds name in a directory.
func (v *View) Lookup(dir store.Entry, name string) (store.Entry, error) {
	t, err := v.tree(dir)
	if err != nil {
		return store.Entry{}, err
	}
	e, ok := t.Lookup(name)
	if !ok {
		return store.Entry{}, fmt.Errorf("lookup %q: %w", name, ErrNotExist)
	}
	return *e, nil
}

// Stat finds the entry at a slash-separated path relative to the root; ""
// and "." are the root. Symlinks are not followed.
func (v *View) Stat(path string) (store.Entry, error) {
	parts, err := store.SplitPath(path)
	if err != nil {
		return store.Entry{}, fmt.Errorf("stat %q: %v: %w", path, err, ErrInvalid)
	}
	e := v.root
	for _, name := range parts {
		if e, err = v.Lookup(e, name); err != nil {
			return store.Entry{}, fmt.Errorf("stat %q: %w", path, err)
		}
	}
	return e, nil
}

// Readlink returns a symlink's target, as stored.
func (v *View) Readlink(e store.Entry) (string, error) {
	if e.Type != store.TypeSymlink {
		return "", fmt.Errorf("readlink %q: %w", e.Name, ErrNotSymlink)
	}
	return e.Target, nil
}

func (v *View) tree(dir store.Entry) (*store.Tree, error) {
	if dir.Type != store.TypeDir {
		return nil, fmt.Errorf("%q: %w", dir.Name, ErrNotDir)
	}
	return v.g.tree(dir.ID)
}
