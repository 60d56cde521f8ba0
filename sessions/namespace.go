package sessions

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// HolderArg is the argument that makes the layerfs binary run HolderMain.
const HolderArg = "__layerfs_holder"

// holderHideEnv names, in a holder's environment, the daemon's state
// directory, which the holder hides from the commands run in its
// namespace.
const holderHideEnv = "LAYERFS_HOLDER_HIDE"

// holder is the process that owns a Workspace's mount and network
// namespaces. It does nothing but wait; closing its stdin (or the daemon
// dying) ends it.
type holder struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	exited chan struct{} // closed once the process has been reaped

	mu      sync.Mutex
	threads [2]*nsThread // in its mount namespace; in its mount and network namespaces
	stopped bool
}

// startHolder starts a holder in new mount and network namespaces, waits
// until it has set them up, and has a thread of this process join its
// mount namespace (see inNamespace), so that neither cost falls on the
// Workspace that gets the holder from the pool. hide is the daemon's state
// directory.
func startHolder(self, hide string) (*holder, error) {
	cmd := exec.Command(self, HolderArg)
	cmd.Env = append(os.Environ(), holderHideEnv+"="+hide)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWNS | unix.CLONE_NEWNET, Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start namespace holder: %w", err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("namespace holder did not start: %q %v", line, err)
	}
	stdout.Close() // a holder writes nothing after ready
	h := &holder{cmd: cmd, stdin: stdin, exited: make(chan struct{})}
	if _, err := h.thread(false); err != nil {
		h.stop()
		<-h.exited
		return nil, err
	}
	return h, nil
}

func (h *holder) pid() int { return h.cmd.Process.Pid }

// stop ends the holder's threads and tells it to exit, without waiting:
// its namespaces, and the mounts in them, go away with it, which can take
// milliseconds. h.exited is closed once it has been reaped. Only the
// first call does anything.
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
	h.stdin.Close()
	// Reap it from now on only: a goroutine waiting for a process holds an
	// OS thread, and a live holder should cost none.
	go func() {
		h.cmd.Wait()
		close(h.exited)
	}()
}

// HolderMain runs in a fresh holder process: it stops its mount namespace
// from sending mounts back to the daemon's, detaches the LayerFS mounts it
// inherited and hides the daemon's state directory (see
// isolateNamespace), brings up loopback in its network namespace, reports
// ready, and waits for stdin to close. The daemon attaches the Workspace's
// overlay later (bindInto).
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

// inNamespace runs fn on an OS thread that has joined the holder's mount
// namespace (and its network namespace too, when net is set); processes fn
// starts inherit them. Each holder keeps one such thread per kind: joining
// a namespace costs milliseconds, so it is done once — for the mount
// namespace when the holder starts, for the network one on first use.
func (h *holder) inNamespace(net bool, fn func() error) error {
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
		return nil, fmt.Errorf("namespace holder %d: %w", h.pid(), ErrClosed)
	}
	i := 0
	if net {
		i = 1
	}
	if h.threads[i] == nil {
		t, err := startThread(h.pid(), net)
		if err != nil {
			return nil, err
		}
		h.threads[i] = t
	}
	return h.threads[i], nil
}

// nsThread is a goroutine locked to an OS thread inside a holder's
// namespaces, running the functions sent to it. The thread is never
// unlocked: when the goroutine ends, the runtime ends the thread with it.
type nsThread struct {
	work chan func()
}

func startThread(pid int, net bool) (*nsThread, error) {
	t := &nsThread{work: make(chan func())}
	errc := make(chan error, 1)
	go t.loop(pid, net, errc)
	if err := <-errc; err != nil {
		return nil, err
	}
	return t, nil
}

// loop joins the namespaces on a thread of its own and serves t.work. The
// runtime never ends the main thread (it parks it instead), so a thread
// left in a holder's namespace must not be the main one: on the main
// thread, loop holds it while another goroutine, which then cannot get it,
// does the work.
func (t *nsThread) loop(pid int, net bool, errc chan<- error) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		inner := make(chan error, 1)
		go t.loop(pid, net, inner)
		err := <-inner
		runtime.UnlockOSThread()
		errc <- err
		return
	}
	if err := enter(pid, net); err != nil {
		errc <- err
		return // still locked: the runtime ends this thread
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

// enter makes the calling (locked) thread join pid's namespaces.
func enter(pid int, net bool) error {
	// setns(CLONE_NEWNS) refuses a thread that shares its filesystem
	// attributes with others, as all Go threads do, so stop sharing first.
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("unshare fs: %w", err)
	}
	if err := setns(pid, "mnt", unix.CLONE_NEWNS); err != nil {
		return err
	}
	if net {
		return setns(pid, "net", unix.CLONE_NEWNET)
	}
	return nil
}

func setns(pid int, name string, flag int) error {
	fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/%s", pid, name), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s namespace of holder %d: %w", name, pid, err)
	}
	defer unix.Close(fd)
	if err := unix.Setns(fd, flag); err != nil {
		return fmt.Errorf("join %s namespace of holder %d: %w", name, pid, err)
	}
	return nil
}

// bindInto makes the holder's target path show src, a mount in the
// daemon's namespace, replacing whatever was attached there before. It
// clones the mount here and moves the clone into the holder's namespace,
// so nothing below the state directory needs to be reachable there.
func (h *holder) bindInto(src, target string) error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("clone mount %s: %w", src, err)
	}
	defer unix.Close(fd)
	return h.inNamespace(false, func() error {
		unix.Unmount(target, unix.MNT_DETACH) // the previous view, if any
		if err := os.MkdirAll(target, 0o755); err != nil {
			return err
		}
		if err := unix.MoveMount(fd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("attach %s at %s: %w", src, target, err)
		}
		return nil
	})
}
