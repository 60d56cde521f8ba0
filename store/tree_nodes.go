package store

import (
	"fmt"
	"slices"

	"github.com/layerfs/layerfs/object"
)

// Large directories are cut into nodes by content, prolly-tree style, so a
// commit that changes one entry rewrites one small leaf and the index
// nodes above it, not the whole directory (Go's tree has directories of
// 800 entries, ~50 KB encoded, on the path of most files).
//
// The cut is a function of the entries' names alone, never of history: a
// directory's ID names its content whatever edits led to it. A directory
// of at most treeSplit entries is one leaf, encoded exactly as before
// nodes existed. A larger one is cut after every entry whose name hashes
// to a boundary (one in treeFanout), and after treeMaxNode entries without
// one; if that leaves one leaf, it is that leaf. Otherwise an index node
// lists the leaves (first name, entry count, ID); index nodes with more
// than treeSplit children are cut the same way, by their first names, into
// a further level, until one node — the root, whose ID the directory's
// entry holds — remains.
//
// Part of the format (see treeSpec): changing these constants changes the
// IDs of large directories.
const (
	treeSplit   = 64  // directories (index nodes) up to this many entries are one node
	treeFanout  = 32  // one name in treeFanout ends a node: the average node size
	treeMaxNode = 256 // a node ends here whatever the names
)

// treeSpec describes the directory node format, recorded in the Store's
// meta: a Store written with other cuts is refused, not misread.
func treeSpec() string {
	return fmt.Sprintf("prolly split=%d fanout=%d max=%d hash=fnv1a64+splitmix64", treeSplit, treeFanout, treeMaxNode)
}

// An index node's canonical bytes start with indexTag: a leaf's start
// with its entry count, and a leaf with no entries is exactly {0}, so no
// leaf starts with these two bytes.
var indexTag = [2]byte{0, 1}

// TreeNode is one stored object of a directory's encoding.
type TreeNode struct {
	ID   object.ID
	Data []byte
}

// nodeRef is one child of an index node.
type nodeRef struct {
	first string // the first name below it
	count int    // entries below it
	id    object.ID
}

// treeIndex is a decoded index node.
type treeIndex struct {
	level    int // 1: the children are leaves
	total    int
	children []nodeRef
}

// Nodes cuts t into the nodes that store it, children before parents: the
// last one is the root, whose ID names the directory.
func (t *Tree) Nodes() ([]TreeNode, error) {
	nodes, _, err := t.nodes(nil)
	return nodes, err
}

// treeLayout is how a large directory is cut: the nodes below its root
// and its leaves, in order.
type treeLayout struct {
	nodes  []object.ID
	leaves []nodeRef
}

// nodes cuts t into its nodes and returns them with its leaves. reuse,
// when set, may name a leaf already stored without encoding it: such a
// node has no Data.
func (t *Tree) nodes(reuse func(es []Entry) (object.ID, bool)) ([]TreeNode, []nodeRef, error) {
	cuts := cutEntries(t.Entries)
	if len(cuts) == 1 {
		data, err := t.Encode()
		if err != nil {
			return nil, nil, err
		}
		return []TreeNode{{ID: object.Sum(object.KindTree, data), Data: data}}, nil, nil
	}
	var nodes []TreeNode
	refs := make([]nodeRef, 0, len(cuts))
	for _, c := range cuts {
		n, err := leafNode(c, reuse)
		if err != nil {
			return nil, nil, err
		}
		nodes = append(nodes, n)
		refs = append(refs, nodeRef{first: c[0].Name, count: len(c), id: n.ID})
	}
	leaves := refs
	for level := 1; ; level++ {
		groups := cutRefs(refs, level)
		next := make([]nodeRef, 0, len(groups))
		for _, g := range groups {
			n := encodeIndex(level, g)
			nodes = append(nodes, n)
			next = append(next, nodeRef{first: g[0].first, count: sumCounts(g), id: n.ID})
		}
		if len(next) == 1 {
			return nodes, leaves, nil
		}
		refs = next
	}
}

func leafNode(es []Entry, reuse func(es []Entry) (object.ID, bool)) (TreeNode, error) {
	if reuse != nil {
		if id, ok := reuse(es); ok {
			return TreeNode{ID: id}, nil
		}
	}
	leaf := Tree{Entries: es}
	data, err := leaf.Encode()
	if err != nil {
		return TreeNode{}, err
	}
	return TreeNode{ID: object.Sum(object.KindTree, data), Data: data}, nil
}

// reuser finds, among old's leaves (old holds its entries), the one that
// holds exactly es: comparing entries costs far less than encoding and
// hashing them again.
func (l *treeLayout) reuser(old *Tree) func(es []Entry) (object.ID, bool) {
	if l == nil || old == nil || len(l.leaves) == 0 {
		return nil
	}
	type span struct {
		start, count int
		id           object.ID
	}
	byFirst := make(map[string]span, len(l.leaves))
	at := 0
	for _, r := range l.leaves {
		byFirst[r.first] = span{at, r.count, r.id}
		at += r.count
	}
	if at != len(old.Entries) {
		return nil
	}
	return func(es []Entry) (object.ID, bool) {
		sp, ok := byFirst[es[0].Name]
		if !ok || sp.count != len(es) || !slices.Equal(old.Entries[sp.start:sp.start+sp.count], es) {
			return object.Zero, false
		}
		return sp.id, true
	}
}

// cutEntries cuts a sorted directory into leaves.
func cutEntries(es []Entry) [][]Entry {
	return cut(es, 0, func(e Entry) string { return e.Name })
}

// cutRefs groups the children of one index level into nodes.
func cutRefs(refs []nodeRef, level int) [][]nodeRef {
	return cut(refs, level, func(r nodeRef) string { return r.first })
}

// cut cuts xs, sorted by name, into the nodes of a level: one node when
// there are at most treeSplit, else after each boundary name and after
// treeMaxNode without one.
func cut[T any](xs []T, level int, name func(T) string) [][]T {
	if len(xs) <= treeSplit {
		return [][]T{xs}
	}
	var cuts [][]T
	start := 0
	for i := range xs {
		if i+1-start >= treeMaxNode || boundary(level, name(xs[i])) {
			cuts = append(cuts, xs[start:i+1])
			start = i + 1
		}
	}
	if start < len(xs) {
		cuts = append(cuts, xs[start:])
	}
	return cuts
}

// boundary reports whether a node at level ends after name: FNV-1a of the
// level and the name, mixed by splitmix64's finalizer.
func boundary(level int, name string) bool {
	h := uint64(14695981039346656037)
	h = (h ^ uint64(level)) * 1099511628211
	for i := 0; i < len(name); i++ {
		h = (h ^ uint64(name[i])) * 1099511628211
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h%treeFanout == 0
}

func sumCounts(refs []nodeRef) int {
	n := 0
	for _, r := range refs {
		n += r.count
	}
	return n
}

func encodeIndex(level int, refs []nodeRef) TreeNode {
	e := object.Encoder{B: make([]byte, 0, 8+len(refs)*48)}
	e.B = append(e.B, indexTag[:]...)
	e.Uvarint(uint64(level))
	e.Uvarint(uint64(sumCounts(refs)))
	e.Uvarint(uint64(len(refs)))
	for _, r := range refs {
		e.String(r.first)
		e.Uvarint(uint64(r.count))
		e.ID(r.id)
	}
	return TreeNode{ID: object.Sum(object.KindTree, e.B), Data: e.B}
}

// IsTreeIndex reports whether a tree object's bytes are an index node,
// which LoadTree assembles, rather than a leaf, which DecodeTree decodes.
func IsTreeIndex(data []byte) bool {
	return len(data) >= 2 && data[0] == indexTag[0] && data[1] == indexTag[1]
}

func decodeIndex(b []byte) (*treeIndex, error) {
	if !IsTreeIndex(b) {
		return nil, fmt.Errorf("tree index: no index tag: %w", ErrCorrupt)
	}
	d := object.Decoder{B: b[2:]}
	ix := &treeIndex{level: int(d.Uvarint()), total: int(d.Uvarint())}
	n := d.Uvarint()
	if ix.level < 1 || ix.level > 16 || n == 0 || n > uint64(len(b)) {
		return nil, fmt.Errorf("tree index: level %d, %d children: %w", ix.level, n, ErrCorrupt)
	}
	ix.children = make([]nodeRef, n)
	sum := 0
	for i := range ix.children {
		r := &ix.children[i]
		r.first, r.count, r.id = d.String(), int(d.Uvarint()), d.ID()
		if d.Err() != nil {
			break
		}
		if r.count < 1 || CheckName(r.first) != nil || (i > 0 && ix.children[i-1].first >= r.first) {
			return nil, fmt.Errorf("tree index: child %d: %w", i, ErrCorrupt)
		}
		sum += r.count
	}
	if err := d.Done(); err != nil {
		return nil, fmt.Errorf("tree index: %w", err)
	}
	if sum != ix.total {
		return nil, fmt.Errorf("tree index: children hold %d entries, index says %d: %w", sum, ix.total, ErrCorrupt)
	}
	return ix, nil
}

// TreeFetcher returns the verified bytes of tree nodes, in the order asked.
type TreeFetcher func(ids []object.ID) ([][]byte, error)

// LoadTree decodes the directory whose root node's bytes are data: a leaf
// directly, an index node by fetching the nodes below it, a level at a
// time. It returns the IDs of those nodes too (nil for a leaf).
func LoadTree(data []byte, fetch TreeFetcher) (*Tree, []object.ID, error) {
	t, l, err := loadTree(data, fetch)
	if l == nil {
		return t, nil, err
	}
	return t, l.nodes, err
}

func loadTree(data []byte, fetch TreeFetcher) (*Tree, *treeLayout, error) {
	if !IsTreeIndex(data) {
		t, err := DecodeTree(data)
		return t, nil, err
	}
	root, refs, parts, err := loadIndex(data, fetch)
	if err != nil {
		return nil, nil, err
	}
	leaves, err := fetchRefs(refs, fetch, &parts)
	if err != nil {
		return nil, nil, err
	}
	t := &Tree{Entries: make([]Entry, 0, root.total)}
	for i, b := range leaves {
		leaf, err := DecodeTree(b)
		if err != nil {
			return nil, nil, fmt.Errorf("tree node %s: %w", refs[i].id.Short(), err)
		}
		es := leaf.Entries
		if len(es) != refs[i].count || es[0].Name != refs[i].first ||
			(len(t.Entries) > 0 && t.Entries[len(t.Entries)-1].Name >= es[0].Name) {
			return nil, nil, fmt.Errorf("tree node %s: does not match its index entry: %w", refs[i].id.Short(), ErrCorrupt)
		}
		t.Entries = append(t.Entries, es...)
	}
	return t, &treeLayout{nodes: parts, leaves: refs}, nil
}

// loadIndex reads the index levels below an index root: it returns the
// root, the leaves it leads to, and the IDs of the index nodes between.
func loadIndex(data []byte, fetch TreeFetcher) (*treeIndex, []nodeRef, []object.ID, error) {
	root, err := decodeIndex(data)
	if err != nil {
		return nil, nil, nil, err
	}
	refs := root.children
	var parts []object.ID
	for level := root.level; level > 1; level-- {
		nodes, err := fetchRefs(refs, fetch, &parts)
		if err != nil {
			return nil, nil, nil, err
		}
		var next []nodeRef
		for i, b := range nodes {
			ix, err := decodeIndex(b)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("tree node %s: %w", refs[i].id.Short(), err)
			}
			if ix.level != level-1 || ix.total != refs[i].count || ix.children[0].first != refs[i].first {
				return nil, nil, nil, fmt.Errorf("tree node %s: does not match its index entry: %w", refs[i].id.Short(), ErrCorrupt)
			}
			next = append(next, ix.children...)
		}
		refs = next
	}
	return root, refs, parts, nil
}

// treeLayout returns how a directory is cut (nil for a leaf), reading
// only its index nodes when it is not cached.
func (s *Store) treeLayout(id object.ID) *treeLayout {
	if l, ok := s.treeLayouts.get(id); ok {
		return l
	}
	data, err := s.Get(id, object.KindTree)
	if err != nil {
		return nil
	}
	if !IsTreeIndex(data) {
		s.treeLayouts.add(id, nil) // a leaf: nothing below it
		return nil
	}
	_, leaves, parts, err := loadIndex(data, s.fetchTreeNodes)
	if err != nil {
		return nil
	}
	for _, r := range leaves {
		parts = append(parts, r.id)
	}
	l := &treeLayout{nodes: parts, leaves: leaves}
	s.treeLayouts.add(id, l)
	return l
}

func fetchRefs(refs []nodeRef, fetch TreeFetcher, parts *[]object.ID) ([][]byte, error) {
	ids := make([]object.ID, len(refs))
	for i, r := range refs {
		ids[i] = r.id
	}
	*parts = append(*parts, ids...)
	nodes, err := fetch(ids)
	if err == nil && len(nodes) != len(ids) {
		err = fmt.Errorf("read %d tree nodes: got %d", len(ids), len(nodes))
	}
	return nodes, err
}
