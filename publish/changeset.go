package publish

import (
	"fmt"
	"sort"
	"strings"

	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// Change is the new state of one path.
type Change struct {
	Path string
	// Entry is the new entry (its Name is ignored), or nil to delete the
	// path and everything below it. A directory entry with a non-zero ID
	// places that whole tree here (a move or a copy); with a zero ID it
	// keeps what the directory held (or starts empty if there was none).
	Entry *store.Entry
	// Opaque, for a directory entry with a zero ID, drops what the
	// directory held before: it starts empty and holds only the changes
	// below it.
	Opaque bool
	// From, when set, is the path this content was moved from; blame
	// carries line owners over from there.
	From string
}

// Changeset is a set of path changes made against a base Commit.
type Changeset struct {
	Base    object.ID // the commit the changes were made against; zero: head
	Changes []Change
}

// Paths lists the touched paths, sorted.
func (cs *Changeset) Paths() []string {
	out := make([]string, len(cs.Changes))
	for i, c := range cs.Changes {
		out[i] = c.Path
	}
	sort.Strings(out)
	return out
}

// Empty reports whether the Changeset touches nothing.
func (cs *Changeset) Empty() bool { return len(cs.Changes) == 0 }

// Check refuses bad paths and a path changed twice.
func (cs *Changeset) Check() error {
	seen := map[string]bool{}
	for _, c := range cs.Changes {
		if c.Path == "" {
			return fmt.Errorf("change of the root: %w", store.ErrBadPath)
		}
		if _, err := store.SplitPath(c.Path); err != nil {
			return err
		}
		if len(c.Path) > store.MaxPath {
			return fmt.Errorf("path %.60q... is %d bytes, more than %d (Linux's PATH_MAX): %w", c.Path, len(c.Path), store.MaxPath, store.ErrBadPath)
		}
		if seen[c.Path] {
			return fmt.Errorf("path %q changed twice in one changeset: %w", c.Path, store.ErrBadPath)
		}
		seen[c.Path] = true
	}
	return nil
}

// changeNode is the Changeset as a tree of path components, so applying it
// visits each affected directory once.
type changeNode struct {
	change   *Change // the change at this path, if any
	children map[string]*changeNode
}

func buildTrie(changes []Change) *changeNode {
	root := &changeNode{}
	for i := range changes {
		c := &changes[i]
		n := root
		for _, name := range strings.Split(c.Path, "/") {
			if n.children == nil {
				n.children = map[string]*changeNode{}
			}
			next, ok := n.children[name]
			if !ok {
				next = &changeNode{}
				n.children[name] = next
			}
			n = next
		}
		n.change = c
	}
	return root
}

// Fingerprint is what the gate compares: whether a path's content or kind
// changed, regardless of mtime or owner.
type Fingerprint struct {
	Exists bool
	Type   store.EntryType
	Mode   uint32
	ID     object.ID
	Target string
}

func fingerprintOf(e *store.Entry) Fingerprint {
	return Fingerprint{Exists: true, Type: e.Type, Mode: e.Mode, ID: e.ID, Target: e.Target}
}
