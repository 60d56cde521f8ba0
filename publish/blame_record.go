package publish

import (
	"errors"

	"github.com/layerfs/layerfs/extents"

	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// blamer records line ownership for the files a landed Commit wrote.
type blamer struct {
	s      *store.Store
	get    extents.Getter // the new content: staged, or stored
	rd     versionReader  // the versions it replaces, and their owners
	parent object.ID      // the tree the changes landed on
	head   object.ID      // the Commit whose tree that is
	commit object.ID
	origin string
	carry  bool // a branch merge: content keeps the owners it has
	merges map[string]*mergeInfo
}

// record appends one ownership row per file the Commit wrote.
func (b *blamer) record(cs *Changeset) error {
	rows, err := b.rowsFor(cs)
	if err != nil {
		return err
	}
	return b.s.AppendBlame(rows)
}

// rowsFor works out one ownership row per file the Commit wrote.
func (b *blamer) rowsFor(cs *Changeset) ([]store.BlameRow, error) {
	var rows []store.BlameRow
	for i := range cs.Changes {
		c := &cs.Changes[i]
		if c.Entry == nil {
			continue
		}
		if mi, ok := b.merges[c.Path]; ok {
			row, err := b.mergedRow(c.Path, mi)
			if err != nil {
				return nil, err
			}
			rows = append(rows, row)
			continue
		}
		if b.carry {
			continue // the content's recorded owners stand as they are
		}
		r, err := b.rows(c)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r...)
	}
	return rows, nil
}

// rows attributes one changed path: a file, or every file of a directory
// moved or copied in whole.
func (b *blamer) rows(c *Change) ([]store.BlameRow, error) {
	switch {
	case c.Entry.Type == store.TypeFile:
		row, err := b.file(c.Path, oldPath(c), c.Entry)
		if err != nil {
			return nil, err
		}
		return []store.BlameRow{row}, nil
	case c.Entry.Type == store.TypeDir && c.From != "" && !c.Entry.ID.IsZero():
		return b.movedTree(c.Entry.ID, c.Path, c.From)
	}
	return nil, nil
}

func oldPath(c *Change) string {
	if c.From != "" {
		return c.From
	}
	return c.Path
}

// file attributes a file's lines against the version it replaced (at from
// in the parent tree): kept lines keep their owners, new ones are ours.
func (b *blamer) file(path, from string, e *store.Entry) (store.BlameRow, error) {
	row := store.BlameRow{Path: path, Content: e.ID, Commit: b.commit}
	nv, err := loadVersion(b.get, e)
	if err != nil {
		return row, err
	}
	old, err := b.s.Lookup(b.parent, from)
	if errors.Is(err, store.ErrNotFound) || (err == nil && old.Type != store.TypeFile) {
		row.Own = uniform(nv, b.origin)
		return row, nil
	}
	if err != nil {
		return row, err
	}
	text, ok, err := loadText(b.rd, &old)
	if err != nil {
		return row, err
	}
	if !ok || nv.binary || !sharesLine(text, nv.lines) {
		// Whoever owned the old lines owns none of these: skip
		// splitting them and looking their owners up (a query, and
		// init's tree).
		row.Own = uniform(nv, b.origin)
		return row, nil
	}
	ov := &version{lines: SplitLines(text)}
	own, err := ownershipOf(b.s, b.rd, from, &old, ov, b.head)
	if err != nil {
		return row, err
	}
	row.Own = carryOwners(own, ov, nv, b.origin)
	return row, nil
}

// movedTree carries ownership over for every file of a moved tree.
func (b *blamer) movedTree(tree object.ID, to, from string) ([]store.BlameRow, error) {
	t, err := b.s.Tree(tree)
	if err != nil {
		return nil, err
	}
	var rows []store.BlameRow
	for i := range t.Entries {
		e := &t.Entries[i]
		dst, src := joinPath(to, e.Name), joinPath(from, e.Name)
		switch e.Type {
		case store.TypeFile:
			row, err := b.file(dst, src, e)
			if err != nil {
				return nil, err
			}
			rows = append(rows, row)
		case store.TypeDir:
			sub, err := b.movedTree(e.ID, dst, src)
			if err != nil {
				return nil, err
			}
			rows = append(rows, sub...)
		}
	}
	return rows, nil
}

// mergedRow credits each line of a merged file to where it came from: a
// head line keeps its owner (Origin::Active), a line of ours belongs to the
// command — or, for a branch merge, keeps the owner it has there.
func (b *blamer) mergedRow(path string, mi *mergeInfo) (store.BlameRow, error) {
	headOwn, err := ownershipOf(b.s, b.rd, path, mi.head, mi.headV, mi.headAt)
	if err != nil {
		return store.BlameRow{}, err
	}
	oursOwn, err := b.oursOwnership(path, mi)
	if err != nil {
		return store.BlameRow{}, err
	}
	heads, ours := expand(headOwn, len(mi.headV.lines)), expand(oursOwn, len(mi.ouV.lines))
	owners := make([]string, len(mi.merged.Sources))
	for i, src := range mi.merged.Sources {
		if src.Side == FromHead {
			owners[i] = heads[src.Index]
		} else {
			owners[i] = ours[src.Index]
		}
	}
	return store.BlameRow{Path: path, Content: mi.result, Commit: b.commit, Own: compress(owners)}, nil
}

// oursOwnership is who owns the lines of ours' version: for a branch
// merge, whoever they belong to on that branch; otherwise the base's
// owners for kept lines and the command for changed ones.
func (b *blamer) oursOwnership(path string, mi *mergeInfo) (store.Ownership, error) {
	if b.carry {
		return ownershipOf(b.s, b.rd, path, mi.ours, mi.ouV, object.Zero) // the merged branch's: not known here
	}
	if mi.base == nil {
		return uniform(mi.ouV, b.origin), nil
	}
	baseOwn, err := ownershipOf(b.s, b.rd, path, mi.base, mi.baseV, mi.baseAt)
	if err != nil {
		return store.Ownership{}, err
	}
	return attribute(baseOwn, mi.baseV, mi.ouV, b.origin), nil
}
