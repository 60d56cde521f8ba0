package sessions

import (
	"bytes"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// reaper ends the processes left in Workspaces' mount namespaces. A
// command still running when its Workspace ends — or left in the
// background, or started by one that did — keeps the namespace alive, and
// with it the Workspace's overlay and, below that, the Store's FUSE mount:
// the daemon could not finish unmounting the Store on SIGTERM until that
// process exited, and an ended Workspace's processes went on writing into
// an upperdir being removed.
type reaper struct {
	mu sync.Mutex
	ns map[uint64]bool // mount namespaces (nsfs inodes) commands ran in
	wg sync.WaitGroup
	// cg, if not nil, is where commands get a cgroup per namespace
	// (cgroup.go); cgs holds the namespaces' cgroups, and cgOff stops new
	// commands from starting in them.
	cg    *cgroups
	cgs   map[uint64]*cgroup
	cgOff bool
	// outside marks namespaces where a command started outside their
	// cgroup (the fd could not be copied): counted by /proc too.
	outside map[uint64]bool
}

// track records that a command runs in mount namespace ns, and returns
// the cgroup to start it in: an fd of its own for SysProcAttr.CgroupFD,
// which the caller closes, or -1.
func (r *reaper) track(ns uint64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ns == nil {
		r.ns, r.outside = map[uint64]bool{}, map[uint64]bool{}
	}
	r.ns[ns] = true
	if r.cg == nil || r.cgOff {
		return -1
	}
	c := r.cgs[ns]
	if c == nil {
		var err error
		if c, err = r.cg.make(); err != nil {
			return -1 // this namespace goes by /proc alone
		}
		if r.cgs == nil {
			r.cgs = map[uint64]*cgroup{}
		}
		r.cgs[ns] = c
	}
	// A copy: killAll may close c.fd while the command starts.
	fd, err := unix.FcntlInt(uintptr(c.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		r.outside[ns] = true // started outside the cgroup: running scans /proc
		return -1
	}
	return fd
}

// noCgroups stops starting commands in cgroups: the kernel refused one.
func (r *reaper) noCgroups() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cgOff = true
}

// forget closes ns's cgroup and returns it, for the caller to remove;
// nil if it has none. Commands started in ns later get a new one. The
// caller has the lock.
func (r *reaper) forget(ns uint64) *cgroup {
	delete(r.outside, ns)
	c := r.cgs[ns]
	if c != nil {
		unix.Close(c.fd)
		delete(r.cgs, ns)
	}
	return c
}

// take forgets ns's cgroup, so that commands started in ns from now on
// get a fresh one, and returns what kill needs to end what runs there.
func (r *reaper) take(ns uint64) (tracked bool, c *cgroup, cg *cgroups) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ns[ns], r.forget(ns), r.cg
}

// kill ends what runs in ns, by its cgroup c (removed) and by namespace,
// trying rounds times 10 ms apart each way; true once all of it is gone.
func kill(ns uint64, tracked bool, c *cgroup, cg *cgroups, rounds int) bool {
	gone := c == nil || cg.remove(c.path, rounds)
	return (!tracked || killUntilGone(map[uint64]bool{ns: true}, rounds)) && gone
}

// release kills, in the background, what still runs in ns and removes
// its cgroup: its Workspace has ended or been detached. Namespaces no
// command ran in cost nothing. pin opens a file on the namespace
// (holder.pin; -1 if it cannot), which release closes once the kill is
// done. Until then the namespace lives on, and its inode number, by which
// the kill finds processes, cannot go to a namespace made meanwhile (the
// kernel hands out the lowest free one), whose commands it would kill.
// The caller ends the namespace's holder only after release returns.
func (r *reaper) release(ns uint64, pin func() int) {
	tracked, c, cg := r.take(ns)
	if !tracked && c == nil {
		return
	}
	fd := pin()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer closePin(fd)
		if kill(ns, tracked, c, cg, 50) {
			r.mu.Lock()
			if r.cgs[ns] == nil { // else a new holder has the inode now
				delete(r.ns, ns)
			}
			r.mu.Unlock()
		}
	}()
}

// killNow kills what runs in ns and returns once it is gone (or after
// about five seconds). Unlike release, ns stays tracked, for the commands
// to come; they start in a fresh cgroup (a cgroup that was killed kills
// what starts in it after).
func (r *reaper) killNow(ns uint64) {
	tracked, c, cg := r.take(ns)
	kill(ns, tracked, c, cg, 500)
}

// killAll kills what runs in every namespace commands ran in, as killNow.
func (r *reaper) killAll() {
	r.mu.Lock()
	ns := make([]uint64, 0, len(r.ns)+len(r.cgs))
	for n := range r.ns {
		ns = append(ns, n)
	}
	for n := range r.cgs {
		if !r.ns[n] {
			ns = append(ns, n)
		}
	}
	r.mu.Unlock()
	for _, n := range ns {
		r.killNow(n)
	}
}

// close waits for the releases under way and then kills what still runs
// in any namespace a command ran in, until nothing does (up to about five
// seconds), and removes the daemon's cgroups.
func (r *reaper) close() {
	r.wg.Wait()
	r.killAll()
	r.mu.Lock()
	r.ns = nil
	cg := r.cg
	r.mu.Unlock()
	if cg != nil {
		cg.close()
	}
}

// killUntilGone sends SIGKILL to the processes in the namespaces ns, and
// again to any that appear, until a scan finds none (true) or after
// rounds scans, 10 ms apart (false).
func killUntilGone(ns map[uint64]bool, rounds int) bool {
	for range rounds {
		if killIn(ns) == 0 {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// killIn sends SIGKILL to every process whose mount namespace is one of
// ns and returns how many it found. A killed process stops counting once
// it has exited: a zombie has left its namespaces.
func killIn(ns map[uint64]bool) int {
	pids := processesIn(ns)
	for _, pid := range pids {
		unix.Kill(pid, unix.SIGKILL)
	}
	return len(pids)
}

// processesIn lists the processes (other than the daemon) whose mount
// namespace is one of ns. It reads each process's ns/mnt link
// ("mnt:[inode]") relative to an open /proc: a stat of the link, which
// follows it into nsfs, took twice as long (0.57 against 0.26 ms a scan
// of ~70 processes), and a commit waits for two scans. Kernel threads,
// which are never in a Workspace's namespace, are left out unread: they
// were 61 of the 66 processes here, and a big machine has hundreds.
func processesIn(ns map[uint64]bool) []int {
	proc, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer proc.Close()
	kernel := kernelThreads()
	names, err := proc.Readdirnames(-1)
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []int
	var buf [64]byte
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid == self || kernel[pid] {
			continue
		}
		n, err := unix.Readlinkat(int(proc.Fd()), name+"/ns/mnt", buf[:])
		if err != nil {
			continue // gone, or not ours to look at
		}
		if ino, ok := nsInode(buf[:n]); ok && ns[ino] {
			out = append(out, pid)
		}
	}
	return out
}

// kernelThreads returns the kernel's threads: kthreadd (PID 2) and its
// children; none where PID 2 is not kthreadd (a PID namespace, where it
// is an ordinary process). Read before /proc is listed, so a kernel
// thread's PID cannot be handed to a process in between: that takes the
// PIDs going round.
func kernelThreads() map[int]bool {
	comm, err := os.ReadFile("/proc/2/comm")
	if err != nil || string(bytes.TrimSpace(comm)) != "kthreadd" {
		return nil
	}
	children, err := os.ReadFile("/proc/2/task/2/children")
	if err != nil {
		return nil // no such file (CONFIG_PROC_CHILDREN)
	}
	kernel := map[int]bool{2: true}
	for _, f := range bytes.Fields(children) {
		if pid, err := strconv.Atoi(string(f)); err == nil {
			kernel[pid] = true
		}
	}
	return kernel
}

// nsInode parses a namespace link's target, "mnt:[4026531841]".
func nsInode(link []byte) (uint64, bool) {
	i := bytes.IndexByte(link, '[')
	if i < 0 || len(link) < i+3 || link[len(link)-1] != ']' {
		return 0, false
	}
	ino, err := strconv.ParseUint(string(link[i+1:len(link)-1]), 10, 64)
	return ino, err == nil
}

// running counts the processes still running in namespace ns; zero when
// no command ever ran there. The caller must keep new commands from
// starting there meanwhile (commit holds the Workspace's lock): when none
// runs, ns is no longer tracked, so ending the Workspace right after need
// not scan for processes again; the next command tracks it anew. None
// runs only if two scans in a row find none: a process that forks and
// exits between one scan's listing of /proc and its look at the process
// leaves a child the listing missed, which the next listing has. (The
// kernel numbers a child before /proc lists it, so a scan that saw no new
// process ID handed out can still have missed one.)
func (r *reaper) running(ns uint64) int {
	r.mu.Lock()
	tracked := r.ns[ns]
	c := r.cgs[ns]
	off := r.cgOff || r.outside[ns]
	r.mu.Unlock()
	if !tracked {
		return 0
	}
	n := 0
	if c != nil {
		n = c.count() // every process the commands started, at once
	}
	if c == nil || off {
		// By namespace too: commands started outside a cgroup.
		in := map[uint64]bool{ns: true}
		m := len(processesIn(in))
		if m == 0 {
			m = len(processesIn(in))
		}
		n = max(n, m)
	}
	if n == 0 {
		r.mu.Lock()
		delete(r.ns, ns)
		delete(r.outside, ns)
		r.mu.Unlock()
	}
	return n
}

// mountNamespace returns the nsfs inode of thread tid's mount namespace.
func mountNamespace(tid int) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/task/"+strconv.Itoa(tid)+"/ns/mnt", &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

func closePin(fd int) {
	if fd >= 0 {
		unix.Close(fd)
	}
}
