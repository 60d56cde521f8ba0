// Package extents stores a file's content as a balanced, content-defined
// tree of extents, reads ranges of it, and edits it (overwrite, append,
// truncate) at a cost that follows the size of the change, not of the file.
// It talks to storage only through Store, and knows nothing of SQL, FUSE or
// paths.
//
// # Canonical form
//
// A File is (ID, Size), and its representation is a pure function of its
// bytes: however content was produced — written whole, or by any sequence of
// edits — its File is what Write makes of it. Identical content is thus
// stored once, and comparing two Files compares their contents.
//
// A file under SmallFileMax (128 KiB) is one KindChunk object, the empty
// file included. A larger file is cut by content with restic's chunker
// (Polynomial, 8–32 KiB, cutting where the low 13 bits of the rolling hash
// are zero: ~15.9 KiB on average) and its ID is the root of a tree of
// KindExtent nodes. A node is a level byte (0 for a leaf), an entry count and
// the entries, each a uvarint length and an ID: a chunk in a leaf, a node of
// the level below otherwise. Offsets are implicit, the sum of the lengths
// before.
//
// Node boundaries are content-defined too, which makes the tree a prolly
// tree: entries are grouped left to right, and a node ends after an entry
// whose ID's first four bytes, as a little-endian uint32, have their low 6
// bits zero (64 entries on average) once it has MinFanout (2) entries, or
// when it reaches MaxFanout (256, so a node stays under 9 KiB). The last
// node of a level ends where the level does. Levels are built until one
// holds a single node, the root. Since a boundary depends only on the
// entries since the previous one, a change to one chunk — even one that
// shifts every byte after it, like prepending to the file — changes one
// leaf and its path to the root.
//
// # Edits
//
// Both cutting rules restart at every boundary: restic's chunker resets its
// rolling hash at each cut, and the node rule counts from each node's start.
// So boundaries after a boundary depend only on what follows it. An edit
// re-chunks from the start of the old chunk holding its offset and stops at
// the first cut after the change that lands on an old boundary (the tests
// check this against chunking whole); every chunk beyond is kept. The new
// chunks replace a run of leaf entries; each level then re-cuts nodes from
// the old node boundary before that run until a new boundary meets an old
// one, sharing every node outside, and passes its new nodes up as the run
// replaced in the level above. An edit thus costs the changed bytes, about
// a chunk on each side, and a node or two per level. The old file's bytes
// are read only in windows up to the next old boundary, extended a chunk at
// a time; a window's last chunk is kept only if it ends where the chunker
// would have cut anyway (realCut). Crossing SmallFileMax either way
// converts between the one-chunk and tree forms; that costs at most the
// change plus 128 KiB. A new chunk carries as PutChunk's base hint the old
// chunk it overlaps most, so a Store can keep it as a delta.
//
// Splice makes the general edit — del bytes at off replaced by data of
// any length — of which Overwrite, Append and Truncate are cases: the
// bytes after it shift, and chunking and node cutting resynchronise as
// they do for a prepend.
//
// Diff and Patch turn a new version of a file, given whole (an overlayfs
// upper file), into edits of the old: Diff hashes the new bytes over the
// old file's extents and returns the ranges whose chunks changed, and
// Patch overwrites those ranges (truncating or appending as the size
// changed). Its edits build into a scratch Store in memory, and only the
// objects the final File names reach the real Store, so several ranges
// sharing a chunk or a node never store an intermediate version.
//
// Runs of repeated content, such as zeros, are the one weakness: when every
// entry has the same ID, boundaries come from the size limits, a shifted run
// never meets the old boundaries again and an edit re-cuts to the end of the
// run. The nodes it makes are identical to each other and mostly to the old
// ones, so the cost is CPU, not storage.
//
// # Reading
//
// A Reader descends one path per read, binary searching each node, and keeps
// decoded nodes in a two-generation cache and the last chunk it read, so
// repeated random reads of a file fetch each node once. Extents lists the
// chunks of a range for callers that fetch or prefetch chunks themselves.
// Walk visits every object of a file (for fsck and stats); Check verifies a
// file is canonical, down to its chunk cuts.
package extents
