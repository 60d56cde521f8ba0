package publish

import (
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// ErrNotDir: a change lies below a path that is not a directory.
var ErrNotDir = errors.New("not a directory")

// notDirError names the path that should have been a directory.
type notDirError struct{ path string }

func (e *notDirError) Error() string { return fmt.Sprintf("%s is not a directory", e.path) }
func (e *notDirError) Unwrap() error { return ErrNotDir }

// applier rebuilds the directories a Changeset touches, bottom-up, staging
// the new trees. Untouched subtrees are shared with the old tree.
type applier struct {
	s     *store.Store
	stage *store.Stage
	now   int64
}

// apply returns the root tree that results from applying the changes in n
// to the tree root.
func (a *applier) apply(root object.ID, n *changeNode) (object.ID, error) {
	id, _, err := a.dir(root, n, "", store.Entry{})
	return id, err
}

// dir applies n's children to the tree id (zero: an empty directory) and
// returns the new tree's ID and whether its list of names changed.
func (a *applier) dir(id object.ID, n *changeNode, path string, self store.Entry) (object.ID, bool, error) {
	t, old := &store.Tree{}, &store.Tree{}
	if !id.IsZero() {
		var err error
		if old, err = a.s.Tree(id); err != nil {
			return object.Zero, false, fmt.Errorf("%s: %w", displayPath(path), err)
		}
		t = old.Clone()
	}
	renamed := false
	var added []store.Entry // appended after the loop: Lookup needs t sorted
	for _, name := range sortedNames(n.children) {
		changed, err := a.child(t, &added, name, n.children[name], joinPath(path, name), self)
		if err != nil {
			return object.Zero, false, err
		}
		renamed = renamed || changed
	}
	if len(added) > 0 { // changes and removals keep the order
		t.Entries = append(t.Entries, added...)
		t.Sort()
	}
	newID, err := a.putTree(t, id, old)
	return newID, renamed, err
}

// child applies the change node for one name in t; it reports whether a
// name was added or removed.
func (a *applier) child(t *store.Tree, added *[]store.Entry, name string, n *changeNode, path string, parent store.Entry) (bool, error) {
	cur, exists := t.Lookup(name)
	if c := n.change; c != nil && c.Entry == nil {
		if len(n.children) > 0 {
			return false, fmt.Errorf("%s: deleted and changed below in one changeset: %w", path, store.ErrBadPath)
		}
		if exists {
			removeEntry(t, name)
		}
		return exists, nil
	}
	e, base, err := a.target(cur, exists, n, path, parent)
	if err != nil {
		return false, err
	}
	if e.Type == store.TypeDir {
		id, renamed, err := a.dir(base, n, path, e)
		if err != nil {
			return false, err
		}
		if renamed && n.change == nil {
			e.MTime = a.now // a name came or went: the directory changed
		}
		e.ID = id
	}
	if exists {
		*cur = e
		return false, nil
	}
	*added = append(*added, e)
	return true, nil
}

// target is the entry a path will hold before its children are applied, and
// the tree its children apply to.
func (a *applier) target(cur *store.Entry, exists bool, n *changeNode, path string, parent store.Entry) (store.Entry, object.ID, error) {
	name := lastName(path)
	if c := n.change; c != nil {
		e := *c.Entry
		e.Name = name
		switch {
		case e.Type != store.TypeDir && len(n.children) > 0:
			return e, object.Zero, &notDirError{path}
		case e.Type != store.TypeDir:
			return e, object.Zero, nil
		case !e.ID.IsZero():
			return e, e.ID, nil // a whole tree placed here: a move or a copy
		case exists && cur.Type == store.TypeDir && !c.Opaque:
			return e, cur.ID, nil
		}
		return e, object.Zero, nil
	}
	if !exists {
		// A parent the change needs but nobody named: make it as mkdir -p.
		return store.Entry{Name: name, Type: store.TypeDir, Mode: 0o755, UID: parent.UID, GID: parent.GID, MTime: a.now}, object.Zero, nil
	}
	if cur.Type != store.TypeDir {
		return *cur, object.Zero, &notDirError{path}
	}
	return *cur, cur.ID, nil
}

// putTree stages t, the new version of the tree old (ID id). A tree whose
// entries did not change keeps its ID, even one stored before large
// directories were cut into nodes.
func (a *applier) putTree(t *store.Tree, id object.ID, old *store.Tree) (object.ID, error) {
	if !id.IsZero() && slices.Equal(t.Entries, old.Entries) {
		return id, nil
	}
	return a.stage.PutTree(t, id)
}

func removeEntry(t *store.Tree, name string) {
	for i := range t.Entries {
		if t.Entries[i].Name == name {
			t.Entries = append(t.Entries[:i], t.Entries[i+1:]...)
			return
		}
	}
}

func sortedNames(m map[string]*changeNode) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func joinPath(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

func lastName(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '/' {
			return path[i+1:]
		}
	}
	return path
}

func displayPath(p string) string {
	if p == "" {
		return "/"
	}
	return p
}
