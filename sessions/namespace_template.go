package sessions

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/internal/mountinfo"
)

// A holder's namespace was a copy of the daemon's, from which
// isolateNamespace then detached every LayerFS mount: one unmount, and one
// RCU grace period, per live Workspace, so that each new Workspace took
// longer the more there were. Now the daemon isolates one namespace, the
// template, and each holder's namespace is a copy of that: nothing to
// detach, however many Workspaces live. The template is made again when
// the daemon's mounts other than LayerFS's change (a filesystem mounted or
// remounted on the host, say), so a new Workspace still sees the host as
// a fresh copy of the daemon's namespace, isolated, would show it.
type nsTemplate struct {
	hide string // the daemon's state directory, hidden in the namespace

	mu     sync.Mutex
	t      *nsThread // the template's thread: nil until first needed
	key    string    // the daemon's mounts it was made from (hostMounts)
	closed bool
}

// enter moves the calling thread, locked and in the daemon's mount
// namespace, to a new mount namespace copied from the template, having
// made the template again first if the daemon's mounts changed.
func (tp *nsTemplate) enter() error {
	mounts, err := mountinfo.Read(mountinfo.Thread)
	if err != nil {
		return err
	}
	fd, err := tp.open(hostMounts(mounts))
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	// setns(CLONE_NEWNS) refuses a thread that shares its filesystem
	// attributes with others, as all Go threads do, so stop sharing first.
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("unshare fs: %w", err)
	}
	commandUmask()
	if err := unix.Setns(fd, unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("enter the template mount namespace: %w", err)
	}
	// Its mounts are private (newMountNamespace), and so are their copies.
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("new mount namespace: %w", err)
	}
	return nil
}

// open opens the template's namespace, made from the daemon's mounts that
// key describes.
func (tp *nsTemplate) open(key string) (int, error) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if tp.closed {
		return -1, fmt.Errorf("workspace namespace: %w", ErrClosed)
	}
	if tp.t == nil || tp.key != key {
		t, err := startThread(func() error { return newMountNamespace(tp.hide) })
		if err != nil {
			return -1, err
		}
		if tp.t != nil {
			tp.t.stop()
		}
		tp.t, tp.key = t, key
	}
	fd, err := unix.Open("/proc/self/task/"+strconv.Itoa(tp.t.tid)+"/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open the template mount namespace: %w", err)
	}
	return fd, nil
}

// close ends the template's thread, and with it the namespace.
func (tp *nsTemplate) close() {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.closed = true
	if tp.t != nil {
		tp.t.stop()
		tp.t = nil
	}
}

// hostMounts describes the mounts that an isolated copy of a namespace
// with mounts keeps: all but LayerFS's, each by its ID (new for every
// mount), where it is mounted (which a mount --move changes, keeping the
// ID) and its options (which a remount changes).
func hostMounts(mounts []mountinfo.Mount) string {
	var b strings.Builder
	for i, lfs := range layerfsFlags(mounts) {
		if !lfs {
			m := mounts[i]
			fmt.Fprintf(&b, "%s %q %s %s\n", m.ID, m.Point, m.Opts, strings.Join(m.SuperOpts, ","))
		}
	}
	return b.String()
}
