package store

import (
	"errors"
	"fmt"
	"math/rand"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/layerfs/layerfs/object"
)

// bigTree is a directory of n files with distinct names and contents.
func bigTree(n int) *Tree {
	t := &Tree{}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("file_%05d.go", i)
		t.Entries = append(t.Entries, Entry{Name: name, Type: TypeFile, Mode: 0o644, Size: int64(i),
			MTime: int64(i), ID: object.Sum(object.KindChunk, []byte(name))})
	}
	t.Sort()
	return t
}

func putTreeFlush(t *testing.T, s *Store, tr *Tree) object.ID {
	t.Helper()
	b := s.NewBatch()
	id, err := b.PutTree(tr)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestTreeNodesRoundTrip: directories of every size read back as written,
// through a fresh Store handle (no cache).
func TestTreeNodesRoundTrip(t *testing.T) {
	s := NewTestStore(t)
	for _, n := range []int{0, 1, treeSplit, treeSplit + 1, 300, 5000, 40000} {
		tr := bigTree(n)
		id := putTreeFlush(t, s, tr)
		nodes, err := tr.Nodes()
		if err != nil {
			t.Fatal(err)
		}
		if n <= treeSplit && len(nodes) != 1 {
			t.Errorf("%d entries: %d nodes, want one leaf", n, len(nodes))
		}
		if n >= 300 && len(nodes) < 3 {
			t.Errorf("%d entries: %d nodes, want it cut", n, len(nodes))
		}
		s2, err := Open(s.Path(), Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		got, err := s2.Tree(id)
		s2.Close()
		if err != nil {
			t.Fatalf("%d entries: %v", n, err)
		}
		if !slices.Equal(got.Entries, tr.Entries) {
			t.Fatalf("%d entries: read back %d entries, differently", n, len(got.Entries))
		}
		if n > 0 {
			e, err := s.Lookup(id, tr.Entries[n/2].Name)
			if err != nil || e != tr.Entries[n/2] {
				t.Errorf("%d entries: lookup: %v", n, err)
			}
		}
	}
}

// TestTreeNodesHistoryIndependent: a directory's ID depends on its
// entries only, not on the edits that led to it, and one edit stages a
// leaf and the index above it, not the directory.
func TestTreeNodesHistoryIndependent(t *testing.T) {
	s := NewTestStore(t)
	rng := rand.New(rand.NewSource(1))
	tr := bigTree(800)
	id := putTreeFlush(t, s, tr)
	for i := 0; i < 50; i++ {
		next := tr.Clone()
		switch j := rng.Intn(len(next.Entries)); i % 3 {
		case 0: // modify
			next.Entries[j].Size++
			next.Entries[j].ID = object.Sum(object.KindChunk, []byte(fmt.Sprint(i)))
		case 1: // delete
			next.Entries = slices.Delete(next.Entries, j, j+1)
		case 2: // add
			next.Entries = append(next.Entries, Entry{Name: fmt.Sprintf("new_%d", i), Type: TypeFile, Mode: 0o600})
			next.Sort()
		}
		st := s.NewStage()
		nid, err := st.PutTree(next, id)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(st.take()); got > 4 {
			t.Errorf("edit %d staged %d tree nodes, want a leaf or two and the index", i, got)
		}
		fresh, _ := next.Nodes()
		if want := fresh[len(fresh)-1].ID; nid != want {
			t.Fatalf("edit %d: ID %s after edits, %s written fresh", i, nid.Short(), want.Short())
		}
		putTreeFlush(t, s, next)
		tr, id = next, nid
	}
}

// TestTreeIndexCorrupt: an index node whose children disagree with it is
// refused as corrupt, never misread.
func TestTreeIndexCorrupt(t *testing.T) {
	s := NewTestStore(t)
	tr := bigTree(300)
	putTreeFlush(t, s, tr)
	nodes, _ := tr.Nodes()
	root, err := decodeIndex(nodes[len(nodes)-1].Data)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(ix *treeIndex){
		"count":  func(ix *treeIndex) { ix.children[0].count++; ix.children[1].count-- },
		"first":  func(ix *treeIndex) { ix.children[1].first = "file_00000.go~" },
		"swap":   func(ix *treeIndex) { ix.children[0].id, ix.children[1].id = ix.children[1].id, ix.children[0].id },
		"level":  func(ix *treeIndex) { ix.level = 2 },
		"absent": func(ix *treeIndex) { ix.children[0].id = object.Sum(object.KindTree, []byte("none")) },
	}
	for name, spoil := range cases {
		ix := &treeIndex{level: root.level, children: slices.Clone(root.children)}
		spoil(ix)
		bad := encodeIndex(ix.level, ix.children)
		b := s.NewBatch()
		if _, err := b.Put(object.KindTree, bad.Data); err != nil {
			t.Fatal(err)
		}
		if err := b.Flush(); err != nil {
			t.Fatal(err)
		}
		_, err := s.Tree(bad.ID)
		want := ErrCorrupt
		if name == "absent" {
			want = ErrNotFound
		}
		if !errors.Is(err, want) {
			t.Errorf("%s: read %v, want %v", name, err, want)
		}
	}
	if _, err := DecodeTree(nodes[len(nodes)-1].Data); !errors.Is(err, ErrCorrupt) {
		t.Errorf("DecodeTree of an index node: %v", err)
	}
}

// TestOpenMigratesFormat4Trees: a format-4 Store keeps a large directory
// as one leaf; after migration it reads the same, and a new version of it
// is written cut into nodes, with the same entries meaning the same ID
// only when written the same way.
func TestOpenMigratesFormat4Trees(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.layerfs")
	s, err := Open(path, Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	tr := bigTree(500)
	data, err := tr.Encode() // format 4: one leaf, whatever the size
	if err != nil {
		t.Fatal(err)
	}
	old := putFlush(t, s, object.KindTree, data)
	for _, q := range []string{`DELETE FROM meta WHERE key = 'trees'`, `PRAGMA user_version = 4`, `UPDATE meta SET value = '4' WHERE key = 'version'`} {
		if _, err := s.w.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	if _, err := Open(path, Options{ReadOnly: true}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("read-only open of a format-4 Store: %v, want it to ask for migration", err)
	}
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Meta("trees") != treeSpec() {
		t.Errorf("meta trees %q after migration", s.Meta("trees"))
	}
	got, err := s.Tree(old)
	if err != nil || !reflect.DeepEqual(got.Entries, tr.Entries) {
		t.Fatalf("old large leaf after migration: %v", err)
	}
	next := tr.Clone()
	next.Entries[7].Size = 12345
	st := s.NewStage()
	id, err := st.PutTree(next, old)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Flush(); err != nil {
		t.Fatal(err)
	}
	raw, err := s.Get(id, object.KindTree)
	if err != nil || !IsTreeIndex(raw) {
		t.Fatalf("new version of a large directory is not cut into nodes: %v", err)
	}
	s2, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if got, err := s2.Tree(id); err != nil || !reflect.DeepEqual(got.Entries, next.Entries) {
		t.Fatalf("new version: %v", err)
	}
}

// TestFsckChecksTreeNodes: fsck counts every node of a large directory
// once across versions, and reports a node that rots.
func TestFsckChecksTreeNodes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.layerfs")
	s, err := Open(path, Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	first := bigTree(400)
	for i := range first.Entries { // links: no content to store
		e := &first.Entries[i]
		e.Type, e.Mode, e.Target, e.Size, e.ID = TypeSymlink, 0o777, "target", 6, object.Zero
	}
	second := first.Clone()
	second.Entries[3].Target = "elsewhere"
	var heads []object.ID
	for _, tr := range []*Tree{first, second} {
		b := s.NewBatch()
		root, err := b.PutTree(tr)
		if err != nil {
			t.Fatal(err)
		}
		c, err := b.PutCommit(&Commit{Tree: root, Parents: heads, Origin: "operation:t", Time: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Flush(); err != nil {
			t.Fatal(err)
		}
		heads = []object.ID{c}
	}
	if err := s.Update(func(tx *RefTx) error { return tx.CreateBranch("b", heads[0], "test") }); err != nil {
		t.Fatal(err)
	}
	nodes1, _ := first.Nodes()
	nodes2, _ := second.Nodes()
	distinct := map[object.ID]bool{}
	for _, n := range append(nodes1, nodes2...) {
		distinct[n.ID] = true
	}
	rep, err := s.Fsck()
	if err != nil || !rep.OK() || rep.Objects != len(distinct)+2 {
		t.Fatalf("fsck: %d objects, want %d tree nodes and 2 commits; %v, %d problems", rep.Objects, len(distinct), err, len(rep.Problems))
	}
	s.Close()
	CorruptObject(t, path, nodes1[1].ID) // a leaf both versions share
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rep, err = s.Fsck()
	if err != nil || rep.OK() {
		t.Fatalf("fsck after a leaf rotted: %v %+v", err, rep)
	}
}
