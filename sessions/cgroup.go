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
// commands ran in; nil where there is none.
type cgroups struct {
	dir string
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
			cg.kill(filepath.Join(dir, e.Name()), 500)
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

// path is the cgroup of mount namespace ns.
func (c *cgroups) path(ns uint64) string {
	return filepath.Join(c.dir, "ns-"+strconv.FormatUint(ns, 10))
}

// open makes ns's cgroup if it is not there and opens it, for
// SysProcAttr.CgroupFD.
func (c *cgroups) open(ns uint64) (int, error) {
	p := c.path(ns)
	if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return -1, err
	}
	fd, err := unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open cgroup %s: %w", p, err)
	}
	return fd, nil
}

// count is how many processes ns's cgroup holds (0 when it has none, or
// is gone).
func (c *cgroups) count(ns uint64) int {
	data, err := os.ReadFile(filepath.Join(c.path(ns), "cgroup.procs"))
	if err != nil {
		return 0
	}
	return bytes.Count(data, []byte("\n"))
}

// release kills what ns's cgroup holds and removes it: true once it is
// gone, false if processes outlived rounds tries 10 ms apart.
func (c *cgroups) release(ns uint64, rounds int) bool {
	return c.kill(c.path(ns), rounds)
}

// kill empties cgroup p and removes it.
func (c *cgroups) kill(p string, rounds int) bool {
	for range rounds {
		if err := unix.Rmdir(p); err == nil || errors.Is(err, unix.ENOENT) {
			return true
		}
		signal(p)
		time.Sleep(10 * time.Millisecond)
	}
	return false
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

// close removes the daemon's directory, once its cgroups are gone.
func (c *cgroups) close() {
	unix.Rmdir(c.dir)
}
