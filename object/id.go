package object

import (
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/zeebo/blake3"
)

// Size is the length of an ID in bytes.
const Size = 32

// ID names an object: the BLAKE3-256 of its kind tag and canonical bytes.
type ID [Size]byte

// Zero is the ID no object has; it marks "none" (no parent, no base).
var Zero ID

// Kind says what an object's canonical bytes encode. The values are part of
// the on-disk format and of every ID: never renumber them.
type Kind uint8

const (
	KindChunk  Kind = 1 // raw file bytes
	KindExtent Kind = 2 // a node of a file's extent tree
	KindTree   Kind = 3 // a directory
	KindCommit Kind = 4 // a snapshot with parents, message and origin
	KindLayer  Kind = 5 // one published version on main
)

var kindNames = map[Kind]string{
	KindChunk:  "chunk",
	KindExtent: "extent",
	KindTree:   "tree",
	KindCommit: "commit",
	KindLayer:  "layer",
}

func (k Kind) String() string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Valid reports whether k is a kind this version knows.
func (k Kind) Valid() bool { _, ok := kindNames[k]; return ok }

// Sum returns the ID of an object of kind k with canonical bytes data.
func Sum(k Kind, data []byte) ID {
	h := blake3.New()
	h.Write([]byte{byte(k)})
	h.Write(data)
	var id ID
	h.Sum(id[:0])
	return id
}

// String is the full lowercase hex form.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// Short is the 12-hex-digit prefix people read in logs and listings.
func (id ID) Short() string { return hex.EncodeToString(id[:6]) }

// IsZero reports whether id is Zero.
func (id ID) IsZero() bool { return id == Zero }

// ErrBadID says a string is not a full hex object ID.
var ErrBadID = errors.New("not an object id")

// Parse reads a full 64-digit hex ID.
func Parse(s string) (ID, error) {
	var id ID
	if len(s) != 2*Size {
		return id, fmt.Errorf("%q: %w (want %d hex digits)", s, ErrBadID, 2*Size)
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, fmt.Errorf("%q: %w", s, ErrBadID)
	}
	return id, nil
}

// FromBytes copies a 32-byte slice into an ID.
func FromBytes(b []byte) (ID, error) {
	var id ID
	if len(b) != Size {
		return id, fmt.Errorf("%w: %d bytes, want %d", ErrBadID, len(b), Size)
	}
	copy(id[:], b)
	return id, nil
}
