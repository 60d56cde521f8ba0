// Package publish is the gate every change passes to land on a branch:
// file calls from the SDK, Workspace commits, and (later) branch merges.
//
// A change arrives as a Changeset: the new state of each path it touches
// (an entry, or a deletion), made against a base Commit. The gate compares
// each touched path's fingerprint — type, mode, content id, link target —
// at the base and at the branch head:
//
//   - unchanged on head: the change lands on top of head as is, together
//     with whatever else head gained since the base ("Committed");
//   - changed on both sides: the whole Changeset is refused ("Conflict",
//     naming the paths and the head it met) and nothing is written;
//   - a result identical to head's tree writes no Commit ("UpToDate").
//
// The new trees are built off-lock on the head read just before; the write
// transaction only checks that head is still that commit, inserts the few
// new trees and the commit, and moves the branch. When another writer got
// in between, the check and the rebuild are redone inside the transaction,
// so a writer always makes progress and the lock is held for one short
// rebuild at most.
//
// Line ownership for a Commit's changed text files is appended to an audit
// table kept apart from the objects (blame), after the Commit: it is worked
// out before the lock (beside the rebuild when there is nothing to merge)
// and inserted in the Commit's transaction after the branch moves, under a
// savepoint, so a failed append rolls back alone. When head moved past the
// paths it read, or the caller defers it (Meta.DeferAudit), it is appended
// after landing in a transaction of its own. Either way, if the append
// fails the Commit stands and those lines read "unknown".
//
// Large directories are cut into nodes (see package store), so a change
// rebuilds one small leaf per large directory on its path, not the whole
// directory.
//
// Capture (CaptureUpper) turns an overlayfs upperdir into a Changeset. A
// big file whose lower version is a file too — copied up and edited in
// place, or replaced — is compared with that version chunk by chunk
// (extents.Diff hashes the upper file over the lower's extents) and only
// the ranges that differ are applied to the lower's extent tree
// (extents.Patch): a 10-byte overwrite of a 32 MiB file stores about one
// chunk and a few nodes, and costs one read and hash of the file rather
// than a re-chunking. When the lower version is in the page cache (the
// copy-up has just read it), the files are compared there instead of by
// hashing, and a file whose size changed is compared from both ends: one
// insertion or deletion anywhere, such as a prepend, becomes one splice
// (extents.Splice). Content shifted otherwise differs everywhere, so when
// more than a bounded part differs capture writes the file whole.
package publish
