package sessions

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// HolderArg is the argument that makes the layerfs binary run HolderMain.
const HolderArg = "__layerfs_holder"

// holderHideEnv names, in a holder's environment, the daemon's state
// directory, which the holder hides from the commands run in its
// namespace.
const holderHideEnv = "LAYERFS_HOLDER_HIDE"

// holder owns a Workspace's mount namespace, and its network namespace once
// a command asks for one. It is a thread of the daemon, locked to its
// goroutine, that made the namespace with unshare(2) and stays in it: the
// namespace lives as long as the thread, and processes started from the
// thread are born in it. A thread costs tens of KiB where a holder process
// cost 2 MiB (a Go runtime of its own), is made in a fraction of a
// millisecond where a process took 5-10 ms to start, and ends at once.
type holder struct {
	ns uint64 // its mount namespace (nsfs inode), for the reaper

	mu      sync.Mutex
	threads [2]*nsThread // in its mount namespace; in its mount and network namespaces
	stopped bool
}

// newHolder makes a fresh mount namespace, a copy of the template's (see
// nsTemplate), on a thread of its own. With background set (the pool
// making a holder ahead of need) the thread does that at background
// priority (see backgroundPriority), so that on busy cores it does not
// hold up the Workspace being created meanwhile, and returns to normal
// priority before it runs commands.
func newHolder(tp *nsTemplate, background bool) (*holder, error) {
	t, err := startThread(func() error {
		if !background {
			return tp.enter()
		}
		backgroundPriority()
		if err := tp.enter(); err != nil {
			return err
		}
		if err := unix.Setpriority(unix.PRIO_PROCESS, 0, 0); err != nil {
			return fmt.Errorf("restore the namespace thread's priority: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	ns, err := mountNamespace(t.tid)
	if err != nil {
		t.stop()
		return nil, err
	}
	return &holder{ns: ns, threads: [2]*nsThread{t}}, nil
}

// newMountNamespace moves the calling (locked) thread to a new mount
// namespace that receives no mount propagation, so no mount made later
// anywhere reaches it, and none made in it leaves; the Workspace's overlay
// is attached to it explicitly (bindDetached). Then it drops the LayerFS mounts
// the namespace was copied with and hides the state directory.
func newMountNamespace(hide string) error {
	// unshare(CLONE_NEWNS) refuses a thread that shares its filesystem
	// attributes with others, as all Go threads do, so stop sharing first.
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("unshare fs: %w", err)
	}
	commandUmask()
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("new mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	return isolateNamespace(hide)
}

// commandUmask sets the umask of the calling thread, which no longer
// shares its filesystem attributes with the daemon's others, to 022: the
// umask of the commands it starts, whatever the daemon was started with
// (a daemon started under umask 077 made every file its commands wrote
// 0600, and so committed it), as a login shell and docker exec have it.
func commandUmask() { unix.Umask(0o022) }

// newNetNamespace moves the calling (locked) thread into the mount
// namespace of thread tid of this process and a new network namespace with
// loopback up.
func newNetNamespace(tid int) error {
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("unshare fs: %w", err)
	}
	commandUmask()
	fd, err := unix.Open(fmt.Sprintf("/proc/self/task/%d/ns/mnt", tid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the Workspace's mount namespace: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Setns(fd, unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("join the Workspace's mount namespace: %w", err)
	}
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("new network namespace: %w", err)
	}
	if err := loopbackUp(); err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	return nil
}

// stop ends the holder's threads; the namespaces, and the mounts in them,
// go away as the threads exit, without the caller waiting. Only the first
// call does anything.
func (h *holder) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return
	}
	h.stopped = true
	for i, t := range h.threads {
		if t != nil {
			t.stop()
			h.threads[i] = nil
		}
	}
}

// HolderMain runs in a holder process: it stops its mount namespace from
// sending mounts back to the daemon's, detaches the LayerFS mounts it
// inherited and hides the daemon's state directory (see isolateNamespace),
// brings up loopback in its network namespace, reports ready, and waits
// for stdin to close. The daemon no longer starts holder processes — its
// holders are threads (see holder) — but the layerfs binary still answers
// HolderArg with it.
func HolderMain() int {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		fmt.Fprintf(os.Stderr, "layerfs holder: make mounts slave: %v\n", err)
		return 1
	}
	if err := isolateNamespace(os.Getenv(holderHideEnv)); err != nil {
		fmt.Fprintf(os.Stderr, "layerfs holder: %v\n", err)
		return 1
	}
	if err := loopbackUp(); err != nil {
		fmt.Fprintf(os.Stderr, "layerfs holder: loopback: %v\n", err)
		return 1
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// loopbackUp sets the lo interface up.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// inNamespace runs fn on the holder's thread in its mount namespace (with
// net set, on its thread in its mount and network namespaces, made on
// first use); processes fn starts inherit them.
func (h *holder) inNamespace(net bool, fn func() error) error {
	if net {
		// What later queued on the mount namespace's thread (an old view's
		// unmount) is done first.
		if err := h.inNamespace(false, func() error { return nil }); err != nil {
			return err
		}
	}
	t, err := h.thread(net)
	if err != nil {
		return err
	}
	return t.run(fn)
}

func (h *holder) thread(net bool) (*nsThread, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return nil, fmt.Errorf("workspace namespace: %w", ErrClosed)
	}
	if !net {
		return h.threads[0], nil
	}
	if h.threads[1] == nil {
		tid := h.threads[0].tid
		t, err := startThread(func() error { return newNetNamespace(tid) })
		if err != nil {
			return nil, err
		}
		h.threads[1] = t
	}
	return h.threads[1], nil
}

// nsThread is a goroutine locked to an OS thread that has left the
// daemon's namespaces, running the functions sent to it. The thread is
// never unlocked: when the goroutine ends, the runtime ends the thread
// with it, and the namespaces with the thread. (A locked thread also never
// spawns the runtime's other threads, so none of them starts out in a
// Workspace's namespace.)
type nsThread struct {
	work chan func()
	tid  int
}

// startThread starts a thread that runs setup, which moves it to its
// namespaces, and then serves run.
func startThread(setup func() error) (*nsThread, error) {
	// One slot, so that later need not wait for the thread.
	t := &nsThread{work: make(chan func(), 1)}
	errc := make(chan error, 1)
	go t.loop(setup, errc)
	if err := <-errc; err != nil {
		return nil, err
	}
	return t, nil
}

// loop runs setup on a thread of its own and serves t.work. The runtime
// never ends the main thread (it parks it instead), so a thread left in a
// Workspace's namespace must not be the main one: on the main thread, loop
// holds it while another goroutine, which then cannot get it, does the
// work.
func (t *nsThread) loop(setup func() error, errc chan<- error) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		inner := make(chan error, 1)
		go t.loop(setup, inner)
		err := <-inner
		runtime.UnlockOSThread()
		errc <- err
		return
	}
	t.tid = unix.Gettid()
	if err := setup(); err != nil {
		errc <- err
		return // still locked: the runtime ends this thread, undoing setup
	}
	errc <- nil
	for fn := range t.work {
		fn()
	}
}

func (t *nsThread) run(fn func() error) error {
	errc := make(chan error, 1)
	t.work <- func() { errc <- fn() }
	return <-errc
}

func (t *nsThread) stop() { close(t.work) }

// bindDetached makes the holder's target path show mfd, a detached mount
// of the daemon's, replacing whatever was attached there before. It
// clones the mount and moves the clone into the holder's namespace, so
// nothing below the state directory needs to be reachable there.
func (h *holder) bindDetached(mfd int, target string) error {
	fd, err := unix.OpenTree(mfd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	if err != nil {
		return fmt.Errorf("clone detached mount: %w", err)
	}
	defer unix.Close(fd)
	return h.attach(fd, target)
}

// attach moves the cloned mount fd to target in the holder's namespace,
// replacing whatever was attached there before.
// The new view goes beneath the one it replaces (MOVE_MOUNT_BENEATH), and
// the old one on top is unmounted after attach returns, on the holder's
// thread before it runs anything else: an unmount waits for an RCU grace
// period, from a fraction of a millisecond to tens of them on busy cores,
// and a commit's reply need not wait for that. Commands start on that
// thread (inNamespace), so none starts before the new view shows.
func (h *holder) attach(fd int, target string) error {
	beneath := false
	err := h.inNamespace(false, func() error {
		if err := os.MkdirAll(target, 0o755); err != nil {
			return err
		}
		if unix.MoveMount(fd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH|moveMountBeneath) == nil {
			beneath = true
			return nil
		}
		// Nothing attached there yet, or a kernel before 6.5.
		unix.Unmount(target, unix.MNT_DETACH)
		if err := unix.MoveMount(fd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("attach the overlay at %s: %w", target, err)
		}
		return nil
	})
	if beneath {
		h.later(func() { unix.Unmount(target, unix.MNT_DETACH) })
	}
	return err
}

// moveMountBeneath is linux/mount.h's MOVE_MOUNT_BENEATH (Linux 6.5),
// which golang.org/x/sys/unix does not name yet.
const moveMountBeneath = 0x200

// later runs fn on the holder's thread in its mount namespace, after what
// is queued there and without waiting for it; not at all once the holder
// is stopped.
func (h *holder) later(fn func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.stopped {
		h.threads[0].work <- fn
	}
}

// pin opens the holder's mount namespace (see reaper.release), or returns
// -1 if it cannot.
func (h *holder) pin() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.threads[0]
	if h.stopped || t == nil {
		return -1
	}
	fd, err := unix.Open("/proc/self/task/"+strconv.Itoa(t.tid)+"/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
}
