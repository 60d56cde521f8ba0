// Package lowerfs is a read-only, FUSE-free view of a Commit: path lookup,
// directory listing with types and sizes, stat, readlink, and reads of file
// ranges through the extent tree. It is what fusefs renders, and it can be
// used on its own (tests, tools) without root or a mount.
//
// # Objects load on demand
//
// Opening a View reads one object, the Commit; nothing is scanned. A
// directory's tree is read the first time something inside it is looked
// up or listed, and a file's chunks the first time a range holding them is
// read. Everything loaded goes through a Cache: a bounded, least recently
// used set of decoded objects (decompressed chunks, extent nodes, decoded
// trees) keyed by object ID. Since objects are immutable and named by their
// content, one Cache can safely serve every View of a Store — two Commits
// that share a file share its cached chunks — and an entry never needs
// invalidating. Concurrent loads of one object are merged, so a reader and
// the read-ahead never fetch the same chunk twice.
//
// # Read-ahead
//
// A File tracks where its last read ended. A read that starts there (or
// close to it: the kernel issues its own read-ahead requests in parallel and
// out of order) is sequential, and each sequential read doubles a window,
// up to Options.ReadAhead, of chunks past the read that are prefetched in
// the background by the Cache's workers, one per core. The window is topped
// up only once half of it has been read, so each top-up is a long run of
// chunks. A read of several chunks also hands all but its first chunk to
// the workers, so one large request is served by every core. A read
// elsewhere resets the window; one a little behind (the kernel's requests
// arrive out of order) leaves it alone. Whatever a read needs that is
// neither cached nor on its way, it loads itself, in one batch. A file's
// extent leaves are read ahead too: the extents Reader names the leaves
// below each node it loads (extents.Prefetcher), and the workers fetch
// them in batches.
//
// Prefetched chunks are claimed in the Cache when they are queued, so a
// reader that needs one waits for the worker rather than loading it a
// second time, and they are read in batches: a Store that offers GetMany
// (BatchStore) reads a batch in one query — *store.Store reads the chunks
// of a file, stored together, in one pass over its table — which costs far
// less than a query per chunk. A full queue makes the reader that adds to
// it wait, which bounds the memory read-ahead can claim.
//
// File.ReadAt copies, as io.ReaderAt must; File.Slices returns the cached
// chunks themselves, for callers (fusefs) that can write them out as they
// are, and release them after.
//
// # Chunk buffers are recycled
//
// A chunk's bytes live in a pooled buffer that a Store offering
// GetManyInto (IntoStore) fills directly, and that goes back to a free
// list once neither the Cache nor any read holds it (see chunk): a fresh
// buffer per chunk, zeroed, faulted in and collected, cost a third of
// reading it. The buffers are cut from slabs mapped outside Go's heap, on
// transparent huge pages where the kernel allows.
//
// So a cached chunk is counted: the Cache holds one reference while it
// keeps the chunk, and each read one until it releases its slices —
// fusefs does when go-fuse has written the reply.
//
// # Errors
//
// A name that is not in a directory is ErrNotExist. A stored object that
// cannot be read — missing from the Store, or failing verification — is an
// *ObjectError naming the object, which errors.Is reports as ErrUnreadable:
// a missing object inside a Commit is damage, never "no such file", and
// fusefs turns it into EIO rather than ENOENT.
package lowerfs
