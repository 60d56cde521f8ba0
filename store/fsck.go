package store

import (
	"errors"
	"fmt"

	"github.com/layerfs/layerfs/extents"
	"github.com/layerfs/layerfs/object"
)

// Problem is one thing fsck found wrong.
type Problem struct {
	What string    `json:"what"` // "missing", "corrupt" or "schema"
	ID   object.ID `json:"-"`
	Hex  string    `json:"id,omitempty"`
	Kind string    `json:"kind,omitempty"`
	From string    `json:"from"` // the ref or path that led to it
	Err  string    `json:"error"`
}

func (p Problem) String() string {
	return fmt.Sprintf("%s %s %s (from %s): %s", p.What, p.Kind, p.Hex, p.From, p.Err)
}

// FsckReport is what Fsck found.
type FsckReport struct {
	Objects  int       `json:"objects_checked"`
	Bytes    int64     `json:"bytes_checked"`
	Problems []Problem `json:"problems"`
}

// OK reports whether the Store is sound.
func (r *FsckReport) OK() bool { return r != nil && len(r.Problems) == 0 }

// Summary is one line for people.
func (r *FsckReport) Summary() string {
	if r == nil {
		return "fsck did not run"
	}
	verdict := "sound"
	if !r.OK() {
		verdict = fmt.Sprintf("NOT sound: %d problems", len(r.Problems))
	}
	return fmt.Sprintf("checked %d objects (%d bytes): %s", r.Objects, r.Bytes, verdict)
}

// Fsck reads every object reachable from every branch, layer and lease — whole
// histories, trees, extent nodes and chunks — and checks that each decodes
// and hashes to its ID. Missing objects (dangling refs) and corrupt ones
// are reported, not returned as errors; the error is for Fsck itself
// failing to run.
func (s *Store) Fsck() (*FsckReport, error) {
	f := &fscker{s: s, rep: &FsckReport{}, seen: map[object.ID]bool{}}
	f.checkSchema()
	// A damaged branch row is reported, and the rest still checked.
	bs, err := s.branches(func(name string, err error) {
		f.rep.Problems = append(f.rep.Problems, Problem{What: "corrupt", Kind: "branch", From: "branch " + name, Err: err.Error()})
	})
	if err != nil {
		return nil, fmt.Errorf("fsck: %w", err)
	}
	for _, b := range bs {
		f.commit(b.Head, "branch "+b.Name)
	}
	ls, err := s.AllLayers() // squashed ones too: L<n> still names them
	if err != nil {
		return nil, fmt.Errorf("fsck: %w", err)
	}
	for _, l := range ls {
		f.layer(l)
	}
	leases, err := s.Leases()
	if err != nil {
		return nil, fmt.Errorf("fsck: %w", err)
	}
	for _, l := range leases {
		f.commit(l.Commit, "lease "+l.ID)
	}
	return f.rep, nil
}

type fscker struct {
	s    *Store
	rep  *FsckReport
	seen map[object.ID]bool
}

// get reads and verifies one object once; nil means it was seen before or
// is broken (and reported).
func (f *fscker) get(id object.ID, k object.Kind, from string) []byte {
	if f.seen[id] {
		return nil
	}
	f.seen[id] = true
	data, err := f.s.Get(id, k)
	if err != nil {
		what := "corrupt"
		if errors.Is(err, ErrNotFound) {
			what = "missing"
		}
		f.problem(what, id, k, from, err)
		return nil
	}
	f.rep.Objects++
	f.rep.Bytes += int64(len(data))
	return data
}

func (f *fscker) problem(what string, id object.ID, k object.Kind, from string, err error) {
	f.rep.Problems = append(f.rep.Problems, Problem{What: what, ID: id, Hex: id.String(), Kind: k.String(), From: from, Err: err.Error()})
}

func (f *fscker) layer(l LayerRef) {
	from := "layer " + l.Name()
	data := f.get(l.ID, object.KindLayer, from)
	if data == nil {
		f.commit(l.Commit, from)
		return
	}
	lo, err := DecodeLayer(data)
	if err != nil {
		f.problem("corrupt", l.ID, object.KindLayer, from, err)
		return
	}
	if lo.Commit != l.Commit || lo.Seq != l.Seq {
		f.problem("corrupt", l.ID, object.KindLayer, from, errors.New("manifest row disagrees with the layer object"))
	}
	f.commit(lo.Commit, from)
}

// commit checks a commit and its whole history, iteratively along first
// parents so long histories do not grow the stack.
func (f *fscker) commit(id object.ID, from string) {
	for !id.IsZero() {
		data := f.get(id, object.KindCommit, from)
		if data == nil {
			return
		}
		c, err := DecodeCommit(data)
		if err != nil {
			f.problem("corrupt", id, object.KindCommit, from, err)
			return
		}
		f.tree(c.Tree, from+", commit "+id.Short()+", path /")
		for _, p := range c.Parents[min(1, len(c.Parents)):] {
			f.commit(p, from)
		}
		id = object.Zero
		if len(c.Parents) > 0 {
			id = c.Parents[0]
		}
	}
}

func (f *fscker) tree(id object.ID, from string) {
	data := f.get(id, object.KindTree, from)
	if data == nil {
		return
	}
	t, _, err := LoadTree(data, f.treeNodes)
	if err != nil {
		what := "corrupt"
		if errors.Is(err, ErrNotFound) {
			what = "missing"
		}
		f.problem(what, id, object.KindTree, from, err)
		return
	}
	for i := range t.Entries {
		e := &t.Entries[i]
		path := from + e.Name
		switch e.Type {
		case TypeDir:
			f.tree(e.ID, path+"/")
		case TypeFile:
			f.file(e, path)
		}
	}
}

// treeNodes reads the nodes of a large directory — a few queries at a
// time, and from the node cache those that versions share, each read
// verified once — counting each node once.
func (f *fscker) treeNodes(ids []object.ID) ([][]byte, error) {
	out, err := f.s.fetchTreeNodes(ids)
	if err != nil {
		return nil, err
	}
	for i, id := range ids {
		if !f.seen[id] {
			f.seen[id] = true
			f.rep.Objects++
			f.rep.Bytes += int64(len(out[i]))
		}
	}
	return out, nil
}

func (f *fscker) file(e *Entry, from string) {
	file := extents.File{ID: e.ID, Size: e.Size}
	if f.seen[file.ID] {
		return
	}
	err := extents.Walk(f.s, file, func(id object.ID, k object.Kind) error {
		f.get(id, k, from)
		return nil
	})
	if err != nil {
		what := "corrupt"
		if errors.Is(err, ErrNotFound) {
			what = "missing"
		}
		f.problem(what, e.ID, file.Kind(), from, err)
	}
}

func (f *fscker) checkSchema() {
	// SQLite's own check of the file: pages, b-trees, and that every
	// index holds what its table does. It reads the whole file, as the
	// object walk after it nearly does.
	rows, err := f.s.r.Query(`PRAGMA integrity_check(20)`)
	if err != nil {
		f.rep.Problems = append(f.rep.Problems, Problem{What: "database", From: "store", Err: fmt.Sprintf("integrity_check: %v", err)})
	} else {
		for rows.Next() {
			var msg string
			if rows.Scan(&msg) == nil && msg != "ok" {
				f.rep.Problems = append(f.rep.Problems, Problem{What: "database", From: "store", Err: msg})
			}
		}
		if err := rows.Err(); err != nil {
			f.rep.Problems = append(f.rep.Problems, Problem{What: "database", From: "store", Err: fmt.Sprintf("integrity_check: %v", err)})
		}
		rows.Close()
	}
	var n int
	err = f.s.r.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' AND name IN
		('objects_append_only_update', 'objects_append_only_delete', 'objects_into_open_pack', 'packs_sealed', 'packs_append_only_delete')`).Scan(&n)
	switch {
	case err != nil:
		f.rep.Problems = append(f.rep.Problems, Problem{What: "schema", From: "store", Err: fmt.Sprintf("append-only triggers: %v", err)})
	case n != 5:
		f.rep.Problems = append(f.rep.Problems, Problem{What: "schema", From: "store", Err: fmt.Sprintf("append-only triggers: %d of 5 present", n)})
	}
}
