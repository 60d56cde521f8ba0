// Package store keeps a project's whole history in one SQLite file.
//
// The Store is the only package that speaks SQL. Everything it holds is one
// of two things:
//
//   - Objects: immutable values named by the BLAKE3-256 of their kind and
//     canonical bytes (see package object). Chunks, extent nodes, trees,
//     commits and layers are all objects. They are written in packs: a pack is
//     the batch of objects one short write transaction inserts, and it is
//     sealed when that transaction commits. SQLite triggers refuse any update
//     or delete of an object or a sealed pack, so history can only grow.
//   - Refs: the few mutable rows that point into the objects — branches,
//     main's manifest of layers — moved in short BEGIN IMMEDIATE transactions.
//
// Each object is its own row, compressed on its own with zstd (or stored raw
// when zstd does not help, or as a zstd delta against the previous version
// of the same chunk when that is smaller; trees, commits and layers, mostly
// 32-byte IDs, are always raw), so reading one chunk reads and
// decompresses about that chunk, never a pack. Every read is verified: the
// bytes must hash to the ID that named them, or the read fails with
// ErrCorrupt.
//
// Reads go through database/sql, except GetManyInto, the sequential read of
// a large file's chunks: it speaks to SQLite through modernc's lib
// directly, on connections of its own, so that a chunk's bytes go from
// SQLite's memory into a buffer the caller recycles. database/sql's driver
// copies every blob into a fresh Go slice, and zeroing, faulting in and
// collecting those cost a third of reading a chunk.
//
// Concurrency follows SQLite's WAL mode: readers never wait for writers, and
// writers — in this process or any other that opened the same file — take
// turns through short immediate transactions with a busy timeout. Bulk writes
// (init, a large commit) go through a Batch that flushes a pack every few
// megabytes, so no transaction holds the write lock for long.
//
// A directory is a tree object; a large one (over 64 entries) is cut into
// nodes by its names, prolly-tree style: leaves of ~32 entries under index
// nodes, so a commit that changes one entry rewrites one small leaf and
// the index above it, not the whole directory. Reading a tree assembles its
// nodes (Store.Tree, LoadTree); trees written before the cut existed are
// single leaves, which every reader reads as they are.
//
// The schema carries a format version. A Store written by a newer format is
// refused with ErrNewerFormat, never misread; an older one is migrated.
package store
