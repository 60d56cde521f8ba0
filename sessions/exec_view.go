package sessions

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// A Workspace's view is attached at its path in its namespace over a
// directory of the host's filesystem, which attach makes. Removing that
// directory on the host — rm -rf of it there, or by a command in another
// Workspace, whose namespace shows the host's directory at that path —
// detaches the view from every namespace it is attached in. Later
// commands then found no directory there or, once one was made again,
// ran in the host's, writing where no commit looks: their changes were
// lost without a word. So each command's start checks that the path shows
// the view, and attaches the view again if not.

// errViewGone: the Workspace's path in its namespace does not show its
// view.
var errViewGone = errors.New("the Workspace's path does not show its view")

// viewID names the root of the view the host path shows.
type viewID struct {
	dev, ino uint64
	ok       bool // false: the host path shows no overlay, and nothing is checked
}

// viewID returns the view the Workspace's host path shows. Callers hold
// w.mu.
func (w *workspace) viewID() viewID {
	var fs unix.Statfs_t
	var st unix.Stat_t
	if unix.Statfs(w.hostPath(), &fs) != nil || fs.Type != unix.OVERLAYFS_SUPER_MAGIC || unix.Stat(w.hostPath(), &st) != nil {
		return viewID{}
	}
	return viewID{dev: st.Dev, ino: st.Ino, ok: true}
}

// shownAt reports whether path, in the calling thread's mount namespace,
// shows the view.
func (v viewID) shownAt(path string) bool {
	var st unix.Stat_t
	return !v.ok || unix.Stat(path, &st) == nil && st.Dev == v.dev && st.Ino == v.ino
}

// reattach attaches the view the host path shows at the Workspace's path
// in its namespace again. Callers hold w.mu for reading.
func (w *workspace) reattach() error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, w.hostPath(), unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("clone the view at %s: %w", w.hostPath(), err)
	}
	defer unix.Close(fd)
	w.logf("%s no longer showed the Workspace to its commands (the directory was removed on the host?): attached again", w.rec.Path)
	return w.holder.attach(fd, w.rec.Path)
}
