package sessions

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Commands run in a cgroup (v2) of their holder's mount namespace, where
// the kernel can: every process they start is in it, whatever it does to
// its namespaces (a command that ran `unshare -m` left the namespace the
// reaper looked in, and outlived its Workspace), and what is still in it
// is one read of cgroup.procs, not two scans of /proc. The daemon's
// cgroups live under one directory named for its state directory, so a
// daemon started after a crash finds the commands the crashed one left
// running — still writing into Workspaces it is about to mount again —
// and kills them first. Without a writable cgroup2 hierarchy the reaper
// goes by mount namespace alone (reap.go).

// cgroups is the daemon's directory of cgroups, one per mount namespace
// commands ran in.
type cgroups struct {
	dir  string
	next atomic.Int64 // names the next cgroup made
}

// A cgroup is one namespace's: commands start in it through fd.
type cgroup struct {
	path string
	fd   int // O_PATH
}

// openCgroups makes (or finds, after a crash) the daemon's directory of
// cgroups for state directory stateDir and kills what a crashed daemon's
// commands left in it. Errors mean no cgroups: the caller logs and goes
// on without.
func openCgroups(stateDir string) (*cgroups, error) {
	root, err := cgroup2Root()
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(abs))
	dir := filepath.Join(root, "layerfs-"+hex.EncodeToString(sum[:6]))
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	cg := &cgroups{dir: dir}
	left, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range left {
		if e.IsDir() {
			cg.remove(filepath.Join(dir, e.Name()), 500)
		}
	}
	return cg, nil
}

// cgroup2Root is where this process's cgroup v2 is: the cgroup2
// filesystem's mount point joined with the process's own cgroup ("0::/x"
// in /proc/self/cgroup).
func cgroup2Root() (string, error) {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	mnt := ""
	for line := range strings.Lines(string(mi)) {
		// ID parent major:minor root mountpoint options... - fstype source super
		pre, post, ok := strings.Cut(line, " - ")
		f := strings.Fields(pre)
		if ok && len(f) >= 5 && strings.HasPrefix(post, "cgroup2 ") && f[3] == "/" {
			mnt = f[4]
			break
		}
	}
	if mnt == "" {
		return "", errors.New("no cgroup2 filesystem mounted")
	}
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(self))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "0::"); ok {
			return filepath.Join(mnt, filepath.Clean("/"+rest)), nil
		}
	}
	return "", errors.New("no cgroup v2 line in /proc/self/cgroup")
}

// make makes a new cgroup and opens it, for SysProcAttr.CgroupFD. Each
// has a name of its own, never used again by this daemon: a cgroup that
// was killed kills what starts in it after, and namespaces' inode
// numbers come round again.
func (c *cgroups) make() (*cgroup, error) {
	for {
		p := filepath.Join(c.dir, "c-"+strconv.FormatInt(c.next.Add(1), 10))
		if err := os.Mkdir(p, 0o755); errors.Is(err, os.ErrExist) {
			continue // one a crashed daemon left that would not go
		} else if err != nil {
			return nil, err
		}
		fd, err := unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			unix.Rmdir(p)
			return nil, fmt.Errorf("open cgroup %s: %w", p, err)
		}
		return &cgroup{path: p, fd: fd}, nil
	}
}

// count is how many processes the cgroup holds: at least 1 if any cgroup
// below it holds one (a command may make its own); 0 if it is gone.
func (g *cgroup) count() int {
	data, err := os.ReadFile(filepath.Join(g.path, "cgroup.procs"))
	if err != nil {
		return 0
	}
	if n := bytes.Count(data, []byte("\n")); n > 0 {
		return n
	}
	if ev, err := os.ReadFile(filepath.Join(g.path, "cgroup.events")); err == nil && bytes.Contains(ev, []byte("populated 1")) {
		return 1
	}
	return 0
}

// remove kills what cgroup p and those below it hold, and removes them:
// true once p is gone, false if processes outlived rounds tries 10 ms
// apart.
func (c *cgroups) remove(p string, rounds int) bool {
	for range rounds {
		if removeTree(p) {
			return true
		}
		signal(p)
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// removeTree removes cgroup p and the cgroups below it, deepest first;
// true if p is gone.
func removeTree(p string) bool {
	if subs, err := os.ReadDir(p); err == nil {
		for _, e := range subs {
			if e.IsDir() {
				removeTree(filepath.Join(p, e.Name()))
			}
		}
	}
	err := unix.Rmdir(p)
	return err == nil || errors.Is(err, unix.ENOENT)
}

// signal kills what cgroup p holds: cgroup.kill (Linux 5.14), or SIGKILL
// to each process it lists.
func signal(p string) {
	if err := os.WriteFile(filepath.Join(p, "cgroup.kill"), []byte("1"), 0); err == nil {
		return
	}
	procs, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
	for _, f := range bytes.Fields(procs) {
		if pid, err := strconv.Atoi(string(f)); err == nil {
			unix.Kill(pid, unix.SIGKILL)
		}
	}
}

// close removes the daemon's directory, and any cgroup left in it.
func (c *cgroups) close() {
	c.remove(c.dir, 100)
}
