package extents

import "github.com/layerfs/layerfs/object"

// Store is where extents keeps its objects. store.Store implements it.
// Its methods must be safe for concurrent use: WriteConcurrent stores
// chunks from several goroutines.
type Store interface {
	// PutChunk stores file bytes as a KindChunk object and returns its ID.
	// base, when not object.Zero, names the chunk this one replaces, a hint
	// the Store may use to keep data as a delta against it. data is the
	// Store's from then on: extents never modifies or reuses it, so the
	// Store may keep it without a copy.
	PutChunk(data []byte, base object.ID) (object.ID, error)
	// PutNode stores an encoded extent node as a KindExtent object; data
	// is the Store's, as with PutChunk.
	PutNode(data []byte) (object.ID, error)
	// Get returns the canonical bytes of object id, which must be of kind k.
	// The caller must not modify the returned slice.
	Get(id object.ID, k object.Kind) ([]byte, error)
}

// Getter is the read half of Store, all that reading, walking and checking
// a file need, so read-only handles can serve them.
type Getter interface {
	Get(id object.ID, k object.Kind) ([]byte, error)
}

// Prefetcher is a Getter that can be told which objects will be asked for
// soon, to load them together in the background. A Reader tells it the
// leaves below each node it loads just above them, so that a long read
// does not fetch its leaves one query each.
type Prefetcher interface {
	Prefetch(ids []object.ID, k object.Kind)
}

// ChunkBatcher is a Store that stores several chunks at once for less
// than one at a time (one lookup of which it already holds, say).
// WriteConcurrent hands it runs of chunks when it has it; each is stored
// as PutChunk with no base would.
type ChunkBatcher interface {
	PutChunks(chunks [][]byte) ([]object.ID, error)
}
