package extents

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/layerfs/layerfs/object"
)

// Node is one node of an extent tree, the canonical content of a KindExtent
// object. A leaf (Level 0) lists chunks; a node at Level n lists nodes at
// Level n-1. Entries are in file order and each entry's offset is the sum of
// the lengths before it.
type Node struct {
	Level   int
	Entries []Entry
}

// Entry is one extent of a node: Len bytes held by chunk or child node ID.
type Entry struct {
	Len int64
	ID  object.ID
}

// Size is the number of file bytes the node covers.
func (n Node) Size() int64 {
	var s int64
	for _, e := range n.Entries {
		s += e.Len
	}
	return s
}

// Encode returns n's canonical bytes: the level byte, the entry count, then
// each entry as a uvarint length and a 32-byte ID.
func (n Node) Encode() []byte {
	e := object.Encoder{B: make([]byte, 0, n.encodedSize())}
	e.Byte(byte(n.Level))
	e.Uvarint(uint64(len(n.Entries)))
	for _, x := range n.Entries {
		e.Uvarint(uint64(x.Len))
		e.ID(x.ID)
	}
	return e.B
}

// encodedSize is the length of n's canonical encoding, the shortest one.
func (n Node) encodedSize() int {
	size := 1 + uvarintLen(uint64(len(n.Entries)))
	for _, x := range n.Entries {
		size += uvarintLen(uint64(x.Len)) + object.Size
	}
	return size
}

func uvarintLen(v uint64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], v)
}

// DecodeNode parses a node's canonical bytes. It accepts only what Encode
// produces for a valid node: a level up to MaxLevel, 1 to MaxFanout entries,
// lengths above zero (at most ChunkMax in a leaf) whose sum fits an int64,
// minimal varints and no trailing bytes. Any other input wraps
// object.ErrCorrupt.
func DecodeNode(data []byte) (Node, error) {
	d := object.Decoder{B: data}
	level := int(d.Byte())
	count := d.Uvarint()
	switch {
	case d.Err() != nil:
		return Node{}, corruptf("truncated header")
	case level > MaxLevel:
		return Node{}, corruptf("level %d above %d", level, MaxLevel)
	case count == 0 || count > MaxFanout:
		return Node{}, corruptf("%d entries", count)
	case count > uint64(len(d.B)/(1+object.Size)):
		return Node{}, corruptf("%d entries in %d bytes", count, len(d.B))
	}
	n := Node{Level: level, Entries: make([]Entry, count)}
	if err := decodeEntries(&d, n); err != nil {
		return Node{}, err
	}
	if d.Done() != nil {
		return Node{}, corruptf("%d trailing bytes", len(d.B))
	}
	if n.encodedSize() != len(data) {
		return Node{}, corruptf("non-minimal varint")
	}
	return n, nil
}

// decodeEntries fills n.Entries from d, checking each length.
func decodeEntries(d *object.Decoder, n Node) error {
	maxLen := uint64(math.MaxInt64)
	if n.Level == 0 {
		maxLen = ChunkMax
	}
	var total uint64
	for i := range n.Entries {
		l, id := d.Uvarint(), d.ID()
		switch {
		case d.Err() != nil:
			return corruptf("entry %d truncated", i)
		case l == 0 || l > maxLen:
			return corruptf("entry %d length %d", i, l)
		case l > math.MaxInt64-total:
			return corruptf("entry %d overflows the file size", i)
		}
		total += l
		n.Entries[i] = Entry{Len: int64(l), ID: id}
	}
	return nil
}

func corruptf(format string, args ...any) error {
	return fmt.Errorf("decode extent node: %s: %w", fmt.Sprintf(format, args...), object.ErrCorrupt)
}

// endsNode is the node boundary rule: a node ends after its count-th entry,
// whose ID is last, when it reaches MaxFanout entries or when it has at
// least MinFanout and last's low FanoutBits bits are zero.
func endsNode(count int, last object.ID) bool {
	r := nodeRule
	if count >= r.max {
		return true
	}
	return count >= r.min && binary.LittleEndian.Uint32(last[:4])&(1<<r.bits-1) == 0
}

// nodeRule holds the parameters of endsNode. Only tests change it, to build
// trees many levels deep from a few MiB, and those tests must not run in
// parallel with others.
var nodeRule = struct{ bits, min, max int }{FanoutBits, MinFanout, MaxFanout}
