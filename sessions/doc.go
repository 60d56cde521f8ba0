// Package sessions is the LayerFS daemon: it serves Workspaces — complete,
// writable, private views of a Branch — to the commands agents run.
//
// One daemon (one per sandbox or container) keeps one long-lived FUSE
// mount of the Store that shows every Commit by id (package fusefs). A
// Workspace is a kernel overlayfs mount whose lowerdir is its leased
// Commit's directory in that mount and whose upperdir and workdir are
// fresh directories on local disk, so creating one copies, scans and
// installs nothing: it records a Lease in the Store, makes two empty
// directories and calls mount(2) twice. Even that is mostly done ahead of
// need: the daemon keeps one spare Workspace of the branch last used, at
// its head — directories, overlay (a detached mount) and namespace — made
// at background priority, so a create that fits it only takes the
// Lease, attaches the overlay and saves the record. When a commit moves
// the head, the spare gets an overlay of the new head in the namespace it
// has.
//
// Commands run in a private mount namespace owned by a holder of the
// Workspace, where the Workspace appears at a path the caller chose (the
// same path in every Workspace) and no other Workspace is visible. A
// holder is a locked OS thread of the daemon that made the namespace
// (unshare CLONE_FS, then CLONE_NEWNS) and stays in it; commands are
// started from that thread, and the namespace ends with it. (Holders were
// processes at first: 2 MiB and 5-10 ms to start each, against tens of
// KiB and a fraction of a millisecond for a thread.) A network namespace,
// loopback only, is made on a second thread when a command first asks to
// be cut off. A new holder detaches the LayerFS mounts its namespace was
// copied with (every Store's FUSE mount, every Workspace overlay) and
// covers the state directory with an empty tmpfs; the daemon then clones
// the Workspace's overlay in its own namespace (open_tree) and moves the
// clone to the chosen path in the holder's (move_mount). So a command sees
// its own Workspace and no other's overlay or upperdir, and no holder pins
// a FUSE mount that some daemon — this one or another on the same host —
// is unmounting. A few holders are made ahead of need.
//
// Commit captures the upperdir (package publish), publishes it through the
// gate, and on success moves the Workspace to the new head: a new Lease, a
// fresh overlay over the new Commit with an empty upperdir; the old
// overlay is detached and its upperdir removed in the background. A
// conflict commits nothing and leaves the upperdir as it was.
//
// Nothing happens on its own: no automatic commit, timeout or unmount. The
// daemon records each Workspace in its state directory, so after a crash
// (kill -9) it comes back with the Workspaces it had, their uncommitted
// changes intact; on SIGINT/SIGTERM it kills the commands still running
// in Workspaces (each would keep its namespace, and so the Store's FUSE
// mount, alive), unmounts everything and keeps the records, so a restart
// resumes them. Ending a Workspace kills what still runs in it too. It
// never issues SQL: the Store does.
//
// Overlays are mounted volatile: overlayfs never syncs the upper
// filesystem, neither when it copies a file up nor when a Workspace is
// unmounted (each commit and each end), and fsync in a command does not
// reach the disk. Otherwise a 10-byte write to a 32 MiB file would first
// write 32 MiB to disk, and every unmount would sync the whole filesystem
// under the state directory. Uncommitted changes survive a daemon crash
// (the page cache outlives it), not necessarily a host crash; a commit is
// as durable as the Store makes it.
package sessions
