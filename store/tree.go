package store

import (
	"fmt"
	"io/fs"
	"math"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/object"
)

// EntryType is what a tree entry names. Part of the on-disk format.
type EntryType uint8

const (
	TypeFile    EntryType = 1
	TypeDir     EntryType = 2
	TypeSymlink EntryType = 3
)

func (t EntryType) String() string {
	switch t {
	case TypeFile:
		return "file"
	case TypeDir:
		return "dir"
	case TypeSymlink:
		return "symlink"
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Entry is one name in a directory.
type Entry struct {
	Name   string
	Type   EntryType
	Mode   uint32 // permission bits with setuid, setgid and sticky (07777)
	UID    uint32
	GID    uint32
	Size   int64     // file: bytes; symlink: target length; dir: 0
	MTime  int64     // modification time, ns since the Unix epoch
	ID     object.ID // file: content (chunk or extent root); dir: tree; symlink: zero
	Target string    // symlink target, stored as written, never followed
}

// MTimeOf is a file's timestamp as an Entry keeps it, in nanoseconds
// since the Unix epoch. One that int64 nanoseconds cannot hold (before
// 1678, after 2262) is kept as the nearest they can, not wrapped around
// into another century.
func MTimeOf(ts unix.Timespec) int64 {
	const limit = math.MaxInt64 / int64(time.Second) // in seconds: 2262-04-11
	switch {
	case ts.Sec >= limit:
		return math.MaxInt64
	case ts.Sec <= -limit:
		return math.MinInt64
	}
	return ts.Sec*int64(time.Second) + ts.Nsec
}

// FileMode returns the entry's mode as an io/fs.FileMode.
func (e *Entry) FileMode() fs.FileMode {
	m := fs.FileMode(e.Mode & 0777)
	if e.Mode&04000 != 0 {
		m |= fs.ModeSetuid
	}
	if e.Mode&02000 != 0 {
		m |= fs.ModeSetgid
	}
	if e.Mode&01000 != 0 {
		m |= fs.ModeSticky
	}
	switch e.Type {
	case TypeDir:
		m |= fs.ModeDir
	case TypeSymlink:
		m |= fs.ModeSymlink
	}
	return m
}

// Tree is a directory: entries sorted by name, bytewise.
type Tree struct {
	Entries []Entry
}

// Lookup finds an entry by name in O(log n).
func (t *Tree) Lookup(name string) (*Entry, bool) {
	i := sort.Search(len(t.Entries), func(i int) bool { return t.Entries[i].Name >= name })
	if i < len(t.Entries) && t.Entries[i].Name == name {
		return &t.Entries[i], true
	}
	return nil, false
}

// Sort orders entries by name; Encode requires it.
func (t *Tree) Sort() {
	sort.Slice(t.Entries, func(i, j int) bool { return t.Entries[i].Name < t.Entries[j].Name })
}

// CheckName reports whether name may be a directory entry.
func CheckName(name string) error {
	switch {
	case name == "" || name == "." || name == "..":
		return fmt.Errorf("name %q: %w", name, ErrBadName)
	case len(name) > 255:
		return fmt.Errorf("name %.20q...: longer than 255 bytes: %w", name, ErrBadName)
	case strings.ContainsAny(name, "/\x00"):
		return fmt.Errorf("name %q: contains / or NUL: %w", name, ErrBadName)
	}
	return nil
}

// Encode returns the tree's canonical bytes.
func (t *Tree) Encode() ([]byte, error) {
	e := object.Encoder{B: make([]byte, 0, 64*len(t.Entries)+8)}
	e.Uvarint(uint64(len(t.Entries)))
	for i := range t.Entries {
		en := &t.Entries[i]
		if err := en.check(); err != nil {
			return nil, err
		}
		if i > 0 && t.Entries[i-1].Name >= en.Name {
			return nil, fmt.Errorf("tree entries not sorted or not unique at %q", en.Name)
		}
		en.encode(&e)
	}
	return e.B, nil
}

func (en *Entry) check() error {
	if err := CheckName(en.Name); err != nil {
		return err
	}
	if en.Type < TypeFile || en.Type > TypeSymlink {
		return fmt.Errorf("entry %q: bad type %d", en.Name, en.Type)
	}
	if en.Mode&^07777 != 0 || en.Size < 0 {
		return fmt.Errorf("entry %q: bad mode %o or size %d", en.Name, en.Mode, en.Size)
	}
	return nil
}

func (en *Entry) encode(e *object.Encoder) {
	e.String(en.Name)
	e.Byte(byte(en.Type))
	e.Uvarint(uint64(en.Mode))
	e.Uvarint(uint64(en.UID))
	e.Uvarint(uint64(en.GID))
	e.Uvarint(uint64(en.Size))
	e.Varint(en.MTime)
	if en.Type == TypeSymlink {
		e.String(en.Target)
	} else {
		e.ID(en.ID)
	}
}

// DecodeTree parses a tree's canonical bytes, strictly.
func DecodeTree(b []byte) (*Tree, error) {
	if IsTreeIndex(b) {
		return nil, fmt.Errorf("tree: an index node, not a leaf (see LoadTree): %w", ErrCorrupt)
	}
	d := object.Decoder{B: b}
	n := d.Uvarint()
	if n > uint64(len(b)) {
		return nil, fmt.Errorf("tree: %d entries in %d bytes: %w", n, len(b), ErrCorrupt)
	}
	t := &Tree{Entries: make([]Entry, n)}
	for i := range t.Entries {
		en := &t.Entries[i]
		decodeEntry(&d, en)
		if d.Err() != nil {
			break
		}
		if en.check() != nil || (i > 0 && t.Entries[i-1].Name >= en.Name) {
			return nil, fmt.Errorf("tree: entry %d: %w", i, ErrCorrupt)
		}
	}
	if err := d.Done(); err != nil {
		return nil, fmt.Errorf("tree: %w", err)
	}
	return t, nil
}

func decodeEntry(d *object.Decoder, en *Entry) {
	en.Name = d.String()
	en.Type = EntryType(d.Byte())
	en.Mode = uint32(d.Uvarint())
	en.UID = uint32(d.Uvarint())
	en.GID = uint32(d.Uvarint())
	en.Size = int64(d.Uvarint())
	en.MTime = d.Varint()
	if en.Type == TypeSymlink {
		en.Target = d.String()
	} else {
		en.ID = d.ID()
	}
}

// PutTree stores a tree, cut into its nodes, and returns its ID.
func (b *Batch) PutTree(t *Tree) (object.ID, error) {
	nodes, err := t.Nodes()
	if err != nil {
		return object.Zero, err
	}
	for _, n := range nodes {
		if _, err := b.Put(object.KindTree, n.Data); err != nil {
			return object.Zero, err
		}
	}
	return nodes[len(nodes)-1].ID, nil
}

// PutTree stages a tree and returns its ID. old is the version it
// replaces (zero: none): the nodes the two share are not staged again.
// The tree is cached, so reading it back costs nothing; t must not be
// modified afterwards.
func (st *Stage) PutTree(t *Tree, old object.ID) (object.ID, error) {
	var was *treeLayout
	var reuse func([]Entry) (object.ID, bool)
	if !old.IsZero() && len(t.Entries) > treeSplit { // else one leaf: nothing to share
		was = st.s.treeLayout(old)
		oldTree, _ := st.s.trees.get(old)
		reuse = was.reuser(oldTree)
	}
	nodes, leaves, err := t.nodes(reuse)
	if err != nil {
		return object.Zero, err
	}
	root := nodes[len(nodes)-1].ID
	if root == old {
		return root, nil
	}
	shared := map[object.ID]bool{}
	if was != nil {
		for _, id := range was.nodes {
			shared[id] = true
		}
	}
	var below []object.ID
	for _, n := range nodes {
		if n.ID != root {
			below = append(below, n.ID)
		}
		if n.Data == nil || shared[n.ID] {
			continue
		}
		if _, err := st.put(object.KindTree, n.Data, object.Zero, true); err != nil { // n.Data is ours to give
			return object.Zero, err
		}
	}
	st.s.trees.add(root, t)
	if leaves == nil {
		st.s.treeLayouts.add(root, nil)
	} else {
		st.s.treeLayouts.add(root, &treeLayout{nodes: below, leaves: leaves})
	}
	return root, nil
}

// Tree reads and decodes a tree, fetching all its nodes. Trees are cached
// and shared: the caller must not modify the result (Clone it first).
func (s *Store) Tree(id object.ID) (*Tree, error) {
	if t, ok := s.trees.get(id); ok {
		return t, nil
	}
	data, err := s.Get(id, object.KindTree)
	if err != nil {
		return nil, err
	}
	t, layout, err := loadTree(data, s.fetchTreeNodes)
	if err != nil {
		return nil, fmt.Errorf("tree %s: %w", id.Short(), err)
	}
	s.trees.add(id, t)
	s.treeLayouts.add(id, layout) // nil for a leaf
	return t, nil
}

// fetchTreeNodes reads tree nodes: from the node cache, the rest a few
// queries at a time (GetMany). A new version of a large directory shares
// all but a leaf or two with the last, so assembling it reads about that.
func (s *Store) fetchTreeNodes(ids []object.ID) ([][]byte, error) {
	out := make([][]byte, len(ids))
	var missing []object.ID
	for i, id := range ids {
		if data, ok := s.treeNodes.get(id); ok {
			out[i] = data
		} else {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	got, err := ManyFetcher(s.GetMany)(missing)
	if err != nil {
		return nil, err
	}
	for i, j := 0, 0; i < len(out); i++ {
		if out[i] == nil {
			out[i] = got[j]
			s.treeNodes.add(missing[j], got[j])
			j++
		}
	}
	return out, nil
}

// ManyFetcher makes a TreeFetcher of a reader that reads several objects
// per call, as Store.GetMany does.
func ManyFetcher(getMany func(ids []object.ID, k object.Kind, fn func(object.ID, []byte, error)) error) TreeFetcher {
	return func(ids []object.ID) ([][]byte, error) {
		at := make(map[object.ID]int, len(ids))
		for i, id := range ids {
			at[id] = i
		}
		out := make([][]byte, len(ids))
		var first error
		err := getMany(ids, object.KindTree, func(id object.ID, data []byte, err error) {
			if err != nil && first == nil {
				first = err
			}
			if i, ok := at[id]; ok {
				out[i] = data
			}
		})
		if err == nil {
			err = first
		}
		if err != nil {
			return nil, err
		}
		for i := range out { // an id asked twice is answered once
			if out[i] == nil {
				out[i] = out[at[ids[i]]]
			}
		}
		return out, nil
	}
}

// Clone returns a copy of t that may be modified.
func (t *Tree) Clone() *Tree {
	return &Tree{Entries: append([]Entry(nil), t.Entries...)}
}
