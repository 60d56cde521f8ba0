package fusefs

import (
	"encoding/binary"
	"sync"

	"github.com/zeebo/blake3"

	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// identity is what a node is, as hashed bytes; see the package doc.
type identity [32]byte

// fileIdentity names a file or symlink by its path inside the Commit and
// its entry, but not by the Commit: the same file at the same path in two
// Commits is one node.
func fileIdentity(path string, e *store.Entry) identity {
	enc := object.Encoder{B: make([]byte, 0, 96+len(path)+len(e.Target))}
	enc.Byte('f')
	enc.String(path)
	enc.Byte(byte(e.Type))
	enc.ID(e.ID)
	enc.Uvarint(uint64(e.Mode))
	enc.Uvarint(uint64(e.UID))
	enc.Uvarint(uint64(e.GID))
	enc.Varint(e.Size)
	enc.Varint(e.MTime)
	enc.String(e.Target)
	return blake3.Sum256(enc.B)
}

// dirIdentity names a directory by the Commit (or root tree) it is in and
// its path: directories are never shared between Commits.
func dirIdentity(root object.ID, path string) identity {
	return syntheticIdentity('d', root.String(), path)
}

// syntheticIdentity names a node that is not in any tree: the all-commits
// root's children, branches/ and its links.
func syntheticIdentity(kind byte, parts ...string) identity {
	enc := object.Encoder{}
	enc.Byte(kind)
	for _, p := range parts {
		enc.String(p)
	}
	return blake3.Sum256(enc.B)
}

// inoTable derives inode numbers from identities and remembers those of
// live nodes, so two identities never share a number while both are live.
type inoTable struct {
	mu   sync.Mutex
	live map[uint64]identity
}

// ino returns the number for id and records it as live.
func (t *inoTable) ino(id identity) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	ino := t.free(id)
	if t.live == nil {
		t.live = map[uint64]identity{}
	}
	t.live[ino] = id
	return ino
}

// peek returns the number ino would, without recording it: for listings
// that create no node.
func (t *inoTable) peek(id identity) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.free(id)
}

// forget drops a node's number when the kernel forgets the node.
func (t *inoTable) forget(ino uint64) {
	t.mu.Lock()
	delete(t.live, ino)
	t.mu.Unlock()
}

// free finds id's number: the first 8 bytes of its hash, rehashed while
// the number is reserved (0, 1 for the root, all ones) or held by another
// live identity. t.mu must be held.
func (t *inoTable) free(id identity) uint64 {
	ino := binary.LittleEndian.Uint64(id[:8])
	for {
		if other, ok := t.live[ino]; ino > 1 && ino != ^uint64(0) && (!ok || other == id) {
			return ino
		}
		ino = splitmix64(ino)
	}
}

func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
