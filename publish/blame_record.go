package publish

import (
	"errors"

	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// recordBlame appends the ownership of every file a landed Commit wrote.
// parent is the tree the changes landed on.
func recordBlame(s *store.Store, parent, commit object.ID, cs *Changeset, origin string) error {
	var rows []store.BlameRow
	for i := range cs.Changes {
		c := &cs.Changes[i]
		if c.Entry == nil {
			continue
		}
		r, err := blameRows(s, parent, commit, c, origin)
		if err != nil {
			return err
		}
		rows = append(rows, r...)
	}
	return s.AppendBlame(rows)
}

// blameRows attributes the lines of one changed path: a file, or every file
// of a directory moved or copied in whole.
func blameRows(s *store.Store, parent, commit object.ID, c *Change, origin string) ([]store.BlameRow, error) {
	switch {
	case c.Entry.Type == store.TypeFile:
		row, err := blameFile(s, parent, commit, c.Path, oldPath(c), c.Entry, origin)
		if err != nil {
			return nil, err
		}
		return []store.BlameRow{row}, nil
	case c.Entry.Type == store.TypeDir && c.From != "" && !c.Entry.ID.IsZero():
		return blameMovedTree(s, parent, commit, c.Entry.ID, c.Path, c.From, origin)
	}
	return nil, nil
}

func oldPath(c *Change) string {
	if c.From != "" {
		return c.From
	}
	return c.Path
}

func blameFile(s *store.Store, parent, commit object.ID, path, from string, e *store.Entry, origin string) (store.BlameRow, error) {
	row := store.BlameRow{Path: path, Content: e.ID, Commit: commit}
	nv, err := loadVersion(s, e)
	if err != nil {
		return row, err
	}
	old, err := s.Lookup(parent, from)
	if errors.Is(err, store.ErrNotFound) || (err == nil && old.Type != store.TypeFile) {
		row.Own = uniform(nv, origin)
		return row, nil
	}
	if err != nil {
		return row, err
	}
	ov, err := loadVersion(s, &old)
	if err != nil {
		return row, err
	}
	own, err := ownershipOf(s, from, &old, ov)
	if err != nil {
		return row, err
	}
	row.Own = attribute(own, ov, nv, origin)
	return row, nil
}

// blameMovedTree carries ownership over for every file of a moved tree.
func blameMovedTree(s *store.Store, parent, commit, tree object.ID, to, from, origin string) ([]store.BlameRow, error) {
	t, err := s.Tree(tree)
	if err != nil {
		return nil, err
	}
	var rows []store.BlameRow
	for i := range t.Entries {
		e := &t.Entries[i]
		dst, src := joinPath(to, e.Name), joinPath(from, e.Name)
		switch e.Type {
		case store.TypeFile:
			row, err := blameFile(s, parent, commit, dst, src, e, origin)
			if err != nil {
				return nil, err
			}
			rows = append(rows, row)
		case store.TypeDir:
			sub, err := blameMovedTree(s, parent, commit, e.ID, dst, src, origin)
			if err != nil {
				return nil, err
			}
			rows = append(rows, sub...)
		}
	}
	return rows, nil
}
