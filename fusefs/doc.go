// Package fusefs serves Commits as a read-only FUSE filesystem: a go-fuse
// node tree over lowerfs, the errno mapping, the mount options, and the
// mount helper's logic (stale mounts, signals, background servers). It is
// the only package that imports go-fuse.
//
// # Two shapes of mount
//
// A single-ref mount shows one Commit's tree at the mountpoint; a branch is
// resolved once, at mount time. An all-commits mount is one long-lived
// mount from which any Commit can be reached, so a Workspace's overlay
// lowerdir is a path inside it rather than a mount of its own:
//
//	<mnt>/<commit-id>/      the Commit's tree (the full 64-digit hex id)
//	<mnt>/<prefix>          symlink to <commit-id>, for a unique prefix of at
//	                        least 4 hex digits, or a layer name (L000003)
//	<mnt>/branches/<name>   symlink to ../<commit-id>, the branch's head
//
// Commit directories appear when looked up; listing the root shows only
// branches/. A branch symlink is resolved when the kernel looks it up and
// is kept for BranchTimeout (1 s by default): within that time every path
// through branches/<name> reaches the same Commit; after it, the next
// lookup resolves the head again. Whoever followed the link is inside an
// immutable <commit-id>/ directory and stays there, so a Workspace that
// takes its lowerdir through branches/<name> is pinned to the Commit it got.
//
// # Immutable content, cached by the kernel
//
// Nothing under a <commit-id>/ ever changes, so the kernel is told to keep
// everything: entries, attributes and negative lookups live for
// EntryTimeout (24 h); file pages are kept across opens; directories are
// opened with FOPEN_CACHE_DIR so a listing is read once; READDIRPLUS
// returns attributes with names; Open and Flush answer ENOSYS, which puts
// the kernel in no-open mode so it stops sending OPEN, FLUSH and RELEASE
// for files at all; extended attributes are disabled the same way. The
// mount is read-only (MS_RDONLY) and every write-type operation that still
// reaches a node answers EROFS. A READ is answered with the cached chunks
// themselves, which go-fuse writes to the kernel with one writev; they are
// released (and their buffers recycled) once it has.
//
// # Inode numbers
//
// A node's inode number is a hash of what it is: for a file or symlink, its
// path inside the Commit and its entry (content id, mode, owner, size,
// mtime); for a directory, the Commit and its path. So a file keeps its
// number when the kernel forgets and looks it up again, and in every later
// mount — git's index stays valid across Workspaces — and an unchanged file
// at the same path in two Commits is one inode, whose cached pages serve
// both. Directories are never shared between Commits, so no directory has
// two parents. The numbers of live nodes are tracked and a hash collision
// is resolved by rehashing.
//
// # Errors
//
// errno.go is the one place errors become errno values. A missing or
// corrupt object gives EIO and a log line naming the object and the path;
// the server keeps running and other files stay readable.
package fusefs
