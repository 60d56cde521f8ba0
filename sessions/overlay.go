package sessions

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/internal/mountinfo"
)

// overlayOptions are the options of a Workspace's overlay (see
// overlayDetached), one "key=value" or flag each. With a data layer
// (data not empty), it is the overlay's data-only layer.
func overlayOptions(lower, data, upper, work string) []string {
	layers := []string{"lowerdir=" + lower}
	if data != "" {
		layers = []string{"lowerdir+=" + lower, "datadir+=" + data}
	}
	return append(layers, "upperdir="+upper, "workdir="+work,
		"redirect_dir=on", "metacopy=on", "index=off", "xino=off", "volatile")
}

// overlayDetached mounts lower (read-only) under upper as a detached
// mount (fsopen, fsconfig, fsmount): it is seen nowhere until moved
// somewhere (move_mount), and goes away when the returned descriptor is
// closed without that. redirect_dir lets renames of lower directories
// work and be captured. metacopy lets a chmod, a rename or a hard link
// copy up metadata only (capture takes the content from the lower layer,
// and a rebase copies the data up first); a data-only layer needs it.
// index and xino stay off because the lower layer is FUSE.
//
// volatile stops overlayfs from syncing the upper filesystem: otherwise
// every copy-up fsyncs the copied file (32 MiB written to disk before a
// 10-byte overwrite can start) and every unmount — each commit's remount,
// each end — runs syncfs on the whole filesystem the state directory is
// on, writing back everyone's dirty data, and fsync and sync in commands
// do the same. Uncommitted changes stay as safe as files a command wrote
// without fsync: a daemon crash (kill -9) loses nothing, since the page
// cache outlives it; a host crash may lose recent writes. Commit is the
// durability point: the Store keeps its own promise (store.Durability).
// A volatile mount leaves a marker in its work directory that makes
// overlayfs refuse the same work directory after a host crash; every
// mount here gets a fresh one (resume removes the old).
func overlayDetached(lower, data, upper, work string) (int, error) {
	fs, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("overlay: fsopen: %w", err)
	}
	defer unix.Close(fs)
	for _, o := range overlayOptions(lower, data, upper, work) {
		k, v, isString := strings.Cut(o, "=")
		if isString {
			err = unix.FsconfigSetString(fs, k, v)
		} else {
			err = unix.FsconfigSetFlag(fs, k)
		}
		if err != nil {
			return -1, fmt.Errorf("overlay: %s: %w", o, err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return -1, fmt.Errorf("overlay over %s: %w", lower, err)
	}
	mfd, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("overlay over %s: fsmount: %w", lower, err)
	}
	return mfd, nil
}

// unmount detaches whatever is mounted at mnt, lazily, so a busy mount
// disappears from view at once and goes away when its last user does.
func unmount(mnt string) error {
	err := unix.Unmount(mnt, unix.MNT_DETACH)
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount %s: %w", mnt, err)
	}
	return nil
}

// retiredDir names the directory, in the daemon's mount directory, where
// a replaced host view waits to be unmounted.
const retiredDir = ".retired"

// setAside moves the mount at mnt, a Workspace's host path, aside and
// returns where to: mnt is then free for the next view at once, and the
// view set aside can still come back (putBack) until unmountAside
// unmounts it in the background (see holder.attach for why). It returns
// "" if nothing was mounted at mnt, or if the view could not be moved
// and was unmounted instead. Moving needs a parent mount that is not
// shared: setup makes the mount directory a private mount of its own.
// The place aside is one an earlier unmount left empty (d.asides), or a
// new one.
func (d *Daemon) setAside(mnt string) (string, error) {
	var aside string
	var err error
	select {
	case aside = <-d.asides:
	default:
		aside, err = os.MkdirTemp(d.dir("mnt", retiredDir), "")
	}
	if err == nil {
		err = unix.MoveMount(unix.AT_FDCWD, mnt, unix.AT_FDCWD, aside, 0)
	}
	if err == nil {
		return aside, nil
	}
	switch {
	case aside == "":
	case errors.Is(err, unix.EINVAL):
		d.reuseAside(aside) // nothing was mounted at mnt
	default:
		os.Remove(aside) // it may be why: not reused
	}
	return "", unmount(mnt) // not a mount (EINVAL), or no way aside: the slow way
}

// putBack undoes setAside: what is mounted at mnt now goes, and the view
// set aside, if any, comes back.
func (d *Daemon) putBack(aside, mnt string) {
	err := unmount(mnt)
	if err == nil && aside != "" {
		if err = unix.MoveMount(unix.AT_FDCWD, aside, unix.AT_FDCWD, mnt, 0); err == nil {
			d.reuseAside(aside)
			return
		}
	}
	if err != nil {
		d.log.Printf("put the view back at %s: %v", mnt, err)
	}
	d.unmountAside(aside)
}

// unmountAside unmounts the view setAside moved to aside, if any, in the
// background.
func (d *Daemon) unmountAside(aside string) {
	if aside == "" {
		return
	}
	d.retiring.Add(1)
	go func() {
		defer d.retiring.Done()
		if unmount(aside) == nil {
			d.reuseAside(aside)
		}
	}()
}

// reuseAside keeps aside, an empty place in .retired, for the next
// setAside, or removes it when enough are kept. rmdir, never RemoveAll: it
// must never reach into a mount's content.
func (d *Daemon) reuseAside(aside string) {
	select {
	case d.asides <- aside:
	default:
		os.Remove(aside)
	}
}

// mountsUnder lists the mount points at or below dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	mounts, err := mountinfo.Read(mountinfo.Self)
	if err != nil {
		return nil, err
	}
	return mountinfo.Under(mounts, dir), nil
}

// removeInBackground deletes directory trees off the hot path: creating
// files soon after deleting many is slow on some filesystems. It removes
// them by name, late: never pass it a name that may be taken again
// meanwhile (see workspace.trash).
//
// One janitor does it, in order, on an OS thread at background priority
// (see backgroundPriority), so on a busy machine the removal a commit or
// an end leaves behind yields the cores to the reply, and to the next
// Workspace's create. (On two busy cores the removal running beside a
// commit's reply added about 1 ms to it.)
func removeInBackground(dirs ...string) {
	janitor.once.Do(func() {
		janitor.wake = make(chan struct{}, 1)
		janitor.idle.L = &janitor.mu
		go janitor.run()
	})
	janitor.mu.Lock()
	janitor.queue = append(janitor.queue, dirs...)
	janitor.pending += len(dirs)
	janitor.mu.Unlock()
	select {
	case janitor.wake <- struct{}{}:
	default:
	}
}

var janitor remover

type remover struct {
	once    sync.Once
	wake    chan struct{}
	mu      sync.Mutex
	idle    sync.Cond // broadcast when pending drops to 0
	queue   []string
	pending int // queued or being removed
}

func (r *remover) run() {
	runtime.LockOSThread() // never unlocked: the thread keeps its priority
	backgroundPriority()
	for range r.wake {
		for d, ok := r.next(); ok; d, ok = r.next() {
			failpoint(FailpointRemove) // a test's hold only: no failure
			for try := 0; try < 5; try++ {
				if os.RemoveAll(d) == nil {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			r.mu.Lock()
			if r.pending--; r.pending == 0 {
				r.idle.Broadcast()
			}
			r.mu.Unlock()
		}
	}
}

// waitIdle waits until every removal asked for so far is done: a daemon
// closing leaves nothing open under its state directory, which its owner
// may then unmount.
func (r *remover) waitIdle() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.pending > 0 {
		r.idle.Wait()
	}
}

// backgroundNice is the priority of the daemon's work ahead of need or
// after the fact: the janitor, the holder pool, the spare. Low, so it
// yields the cores to requests; not the lowest, because that work takes
// kernel locks requests also take (the mount namespace lock for unshare,
// open_tree and umount; a directory's lock for mkdir and rmdir), and a
// thread at nice 19 preempted while holding one can keep a request waiting
// for as long as the busy cores let it wait.
const backgroundNice = 10

// backgroundPriority sets the calling thread, which must be locked to its
// goroutine, to backgroundNice. On Linux setpriority(PRIO_PROCESS, 0)
// applies to the calling thread alone.
func backgroundPriority() { unix.Setpriority(unix.PRIO_PROCESS, 0, backgroundNice) }

func (r *remover) next() (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.queue) == 0 {
		return "", false
	}
	d := r.queue[0]
	r.queue = r.queue[1:]
	return d, true
}
