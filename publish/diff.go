package publish

import (
	"fmt"

	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// ChangeKind says how a path differs between two trees.
type ChangeKind string

const (
	Added       ChangeKind = "added"
	Modified    ChangeKind = "modified"
	Deleted     ChangeKind = "deleted"
	TypeChanged ChangeKind = "type-changed"
)

// PathDiff is one path that differs. Directories appear only when added or
// deleted empty, or when their own metadata changed; files, symlinks, and
// the contents of added or deleted directories appear one by one.
type PathDiff struct {
	Path string       `json:"path"`
	Kind ChangeKind   `json:"kind"`
	Old  *store.Entry `json:"-"`
	New  *store.Entry `json:"-"`
}

// DiffTrees lists what differs from tree a to tree b, sorted by path. It
// walks only subtrees whose IDs differ, so its cost follows the change,
// not the tree.
func DiffTrees(s *store.Store, a, b object.ID) ([]PathDiff, error) {
	d := &differ{s: s}
	err := d.trees(a, b, "")
	return d.out, err
}

type differ struct {
	s   *store.Store
	out []PathDiff
}

func (d *differ) tree(id object.ID) (*store.Tree, error) {
	if id.IsZero() {
		return &store.Tree{}, nil
	}
	return d.s.Tree(id)
}

func (d *differ) trees(a, b object.ID, dir string) error {
	if a == b {
		return nil
	}
	ta, err := d.tree(a)
	if err != nil {
		return fmt.Errorf("diff %s: %w", displayPath(dir), err)
	}
	tb, err := d.tree(b)
	if err != nil {
		return fmt.Errorf("diff %s: %w", displayPath(dir), err)
	}
	i, j := 0, 0
	for i < len(ta.Entries) || j < len(tb.Entries) {
		var ea, eb *store.Entry
		switch {
		case j == len(tb.Entries) || (i < len(ta.Entries) && ta.Entries[i].Name < tb.Entries[j].Name):
			ea, i = &ta.Entries[i], i+1
		case i == len(ta.Entries) || tb.Entries[j].Name < ta.Entries[i].Name:
			eb, j = &tb.Entries[j], j+1
		default:
			ea, eb, i, j = &ta.Entries[i], &tb.Entries[j], i+1, j+1
		}
		if err := d.entry(ea, eb, dir); err != nil {
			return err
		}
	}
	return nil
}

func (d *differ) entry(ea, eb *store.Entry, dir string) error {
	var name string
	if ea != nil {
		name = ea.Name
	} else {
		name = eb.Name
	}
	p := joinPath(dir, name)
	switch {
	case ea == nil:
		return d.whole(eb, p, Added)
	case eb == nil:
		return d.whole(ea, p, Deleted)
	case ea.Type != eb.Type:
		d.out = append(d.out, PathDiff{Path: p, Kind: TypeChanged, Old: ea, New: eb})
		if eb.Type == store.TypeDir {
			return d.trees(object.Zero, eb.ID, p)
		}
		if ea.Type == store.TypeDir {
			return d.trees(ea.ID, object.Zero, p)
		}
		return nil
	case ea.Type == store.TypeDir:
		if !sameDirMeta(ea, eb) {
			d.out = append(d.out, PathDiff{Path: p, Kind: Modified, Old: ea, New: eb})
		}
		return d.trees(ea.ID, eb.ID, p)
	case *ea != *eb:
		d.out = append(d.out, PathDiff{Path: p, Kind: Modified, Old: ea, New: eb})
	}
	return nil
}

// sameDirMeta compares a directory's own metadata, not its contents.
func sameDirMeta(a, b *store.Entry) bool {
	return a.Mode == b.Mode && a.UID == b.UID && a.GID == b.GID
}

// whole reports an added or deleted entry; a directory contributes its
// contents, or itself when empty.
func (d *differ) whole(e *store.Entry, p string, kind ChangeKind) error {
	if e.Type != store.TypeDir {
		d.out = append(d.out, d.single(e, p, kind))
		return nil
	}
	t, err := d.tree(e.ID)
	if err != nil {
		return err
	}
	if len(t.Entries) == 0 {
		d.out = append(d.out, d.single(e, p, kind))
	}
	for i := range t.Entries {
		if err := d.whole(&t.Entries[i], joinPath(p, t.Entries[i].Name), kind); err != nil {
			return err
		}
	}
	return nil
}

func (d *differ) single(e *store.Entry, p string, kind ChangeKind) PathDiff {
	if kind == Added {
		return PathDiff{Path: p, Kind: kind, New: e}
	}
	return PathDiff{Path: p, Kind: kind, Old: e}
}
