package extents

import (
	"github.com/restic/chunker"

	"github.com/layerfs/layerfs/object"
)

// File names a file's content: the object that holds it and its length.
// A File with Size < SmallFileMax names one KindChunk object; a larger one
// names the root KindExtent node of its extent tree. Two Files are equal
// exactly when their contents are.
type File struct {
	ID   object.ID
	Size int64
}

// Kind is the kind of object f.ID names.
func (f File) Kind() object.Kind {
	if f.small() {
		return object.KindChunk
	}
	return object.KindExtent
}

func (f File) small() bool { return f.Size < SmallFileMax }

// Format parameters. They decide every chunk and node boundary, so changing
// any of them changes the IDs of all files that use them.
const (
	// SmallFileMax is the size from which a file is cut into chunks; a
	// smaller file is a single chunk.
	SmallFileMax = 128 << 10
	// ChunkMin and ChunkMax bound the chunks of a large file; only its
	// last chunk may be shorter than ChunkMin.
	ChunkMin = 8 << 10
	ChunkMax = 32 << 10
	// chunkAverageBits makes the chunker cut where the low 13 bits of its
	// rolling hash are zero: with the bounds above, chunks average ~15.9 KiB.
	chunkAverageBits = 13
	chunkSplitMask   = 1<<chunkAverageBits - 1

	// FanoutBits sets the average node fan-out to 1<<FanoutBits = 64: a node
	// ends after an entry whose ID's first four bytes, read as a
	// little-endian uint32, have their low FanoutBits bits zero.
	FanoutBits = 6
	// MinFanout is the fewest entries a node ends at on a matching ID; it
	// keeps trees of repeated content (all entries one ID) shrinking.
	MinFanout = 2
	// MaxFanout is the most entries a node holds; it ends there regardless.
	// Random content reaches it in under 2% of nodes; runs of one repeated
	// chunk (zeros) always do, and it keeps their nodes under 9 KiB.
	MaxFanout = 256
	// MaxLevel is the highest level a node may have. With MinFanout 2 an
	// int64-sized file needs fewer than 52 levels.
	MaxLevel = 63
)

// Polynomial is the irreducible polynomial every LayerFS chunker uses. The
// Store records it; a Store made with another polynomial cannot share
// chunks with this one.
const Polynomial = chunker.Pol(0x3f5eddefe2f385)
