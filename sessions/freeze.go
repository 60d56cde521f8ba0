package sessions

import (
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// A commit captures the upperdir, publishes what it found, and then
// switches the Workspace to a view of the new head over a fresh upperdir;
// the old one is removed. Commands cannot write in between (the commit is
// refused while any run, unless allow_running says their late writes may
// go), but editors and tools outside write through the host path, and
// what they wrote there after the capture began went with the old
// upperdir, without a word. So for that span the host path's view is
// read-only: a write there fails (EROFS), to be made again once the
// commit is done, rather than being lost.
//
// Only the host path's mount is made read-only, not the view itself: the
// namespace's mount of the same view, where commands run with
// allow_running write, is another mount. The daemon's own writes to the
// view in that span (copy-ups before a carry or a rebase) go through a
// writable clone of the host path's mount (writableView). The flag is the
// mount's (mount_setattr), which the kernel refuses to set while a file is
// open for writing through that mount (EBUSY): then the commit goes on as
// it did, and says so in the log.

// frozenHost is a commit's hold on the view at the host path.
type frozenHost struct {
	clone int // a writable clone of the mount there, or -1
}

// freezeHost makes the view at the Workspace's host path read-only, if
// that shows the Workspace's view, and returns the function that makes it
// writable again, to call once the commit is done, whatever became of
// it. Callers hold w.mu.
func (w *workspace) freezeHost() (thaw func()) {
	host := w.hostPath()
	if !isOverlay(host) {
		return func() {} // no view there (removed on the host): nothing to keep
	}
	err := unix.MountSetattr(unix.AT_FDCWD, host, 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
	if err != nil {
		if errors.Is(err, unix.EBUSY) {
			w.logf("a file is open for writing at %s: what is written there during this commit is not kept", host)
		} else {
			w.logf("could not make %s read-only for the commit: %v", host, err)
		}
		return func() {}
	}
	w.frozen = &frozenHost{clone: -1}
	return w.thawHost
}

// thawHost makes the view at the host path writable again — the view the
// commit froze, if it is still there (the commit did not switch), or the
// new one, which is already — and lets the clone go.
func (w *workspace) thawHost() {
	if w.frozen.clone >= 0 {
		// The last reference to a detached mount unmounts it, which
		// waits for an RCU grace period: not on the commit's path.
		go unix.Close(w.frozen.clone)
	}
	w.frozen = nil
	host := w.hostPath()
	if !isOverlay(host) {
		return // not a view: the mount under it is not the commit's to change
	}
	if err := unix.MountSetattr(unix.AT_FDCWD, host, 0, &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}); err != nil {
		w.logf("could not make %s writable again after the commit: %v", host, err)
	}
}

// writableView returns the path through which the daemon writes to the
// Workspace's view: its host path, or, while a commit holds that
// read-only, a writable clone of the mount there, made at the first
// need. Callers hold w.mu.
func (w *workspace) writableView() (string, error) {
	if w.frozen == nil {
		return w.hostPath(), nil
	}
	if w.frozen.clone < 0 {
		host := w.hostPath()
		fd, err := unix.OpenTree(unix.AT_FDCWD, host, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			return "", fmt.Errorf("clone the view at %s: %w", host, err)
		}
		err = unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY})
		if err != nil {
			go unix.Close(fd)
			return "", fmt.Errorf("make a clone of the view at %s writable: %w", host, err)
		}
		w.frozen.clone = fd
	}
	return "/proc/self/fd/" + strconv.Itoa(w.frozen.clone), nil
}

// isOverlay reports whether path is on an overlayfs mount.
func isOverlay(path string) bool {
	var fs unix.Statfs_t
	return unix.Statfs(path, &fs) == nil && fs.Type == unix.OVERLAYFS_SUPER_MAGIC
}
