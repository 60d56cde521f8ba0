package integration

import (
	"bufio"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Helpers of the mount tests. Every mount they make is unmounted in
// t.Cleanup; servers started in the foreground are stopped by PID.

// initStore captures dir into a new Store and returns the Store's path.
func initStore(t *testing.T, dir string) string {
	t.Helper()
	s := filepath.Join(t.TempDir(), "s.layerfs")
	runLayerfs(t, "init", "--quiet", "--durability", "fast", "--store", s, dir)
	return s
}

// mountStore runs layerfs mount with args (a ref, or --all-commits) at a
// new mountpoint, which it returns, and unmounts it when the test ends.
func mountStore(t *testing.T, storePath string, args ...string) string {
	t.Helper()
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	full := append([]string{"mount", "--store", storePath}, args...)
	runLayerfs(t, append(full, mnt)...)
	t.Cleanup(func() { unmount(t, mnt) })
	return mnt
}

// unmount unmounts a layerfs mount, if it is still mounted, and waits
// until it is gone.
func unmount(t *testing.T, mnt string) {
	t.Helper()
	if !layerfsMounted(mnt) {
		return
	}
	if out, err := exec.Command(layerfsBin, "umount", mnt).CombinedOutput(); err != nil {
		t.Errorf("umount %s: %v %s; detaching it", mnt, err, out)
		syscall.Unmount(mnt, syscall.MNT_DETACH)
	}
	waitMounted(t, mnt, false)
}

// layerfsMounted reports whether a layerfs mount is at mnt.
func layerfsMounted(mnt string) bool {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		before, after, _ := strings.Cut(sc.Text(), " - ")
		fields := strings.Fields(before)
		if len(fields) > 4 && fields[4] == mnt && strings.HasPrefix(after, "fuse.layerfs ") {
			return true
		}
	}
	return false
}

// waitMounted waits up to 10 s for mnt to be (or not be) a layerfs mount.
func waitMounted(t *testing.T, mnt string, want bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if layerfsMounted(mnt) == want {
			return
		}
	}
	t.Fatalf("%s: mounted is not %v after 10 s", mnt, want)
}

// startServer runs layerfs mount --foreground and waits for its mount.
// The test's cleanup kills the server, by PID, if it still runs, and
// detaches what it left.
func startServer(t *testing.T, storePath, ref, mnt string, extra ...string) *exec.Cmd {
	t.Helper()
	args := append([]string{"mount", "--foreground", "--store", storePath}, extra...)
	cmd := exec.Command(layerfsBin, append(args, ref, mnt)...)
	// The server logs "serving MNT" once go-fuse's start-up requests to
	// its own mount are done. A kill before that can leave it stuck in
	// the kernel, flushing a file of its own mount that nobody serves.
	ready := make(chan struct{})
	cmd.Stderr = &lineWatch{w: os.Stderr, want: "serving " + mnt, seen: ready}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	serverExits.Store(cmd, exited)
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
		if layerfsMounted(mnt) {
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
	})
	waitMounted(t, mnt, true)
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatalf("the server at %s did not log that it serves within 10 s", mnt)
	}
	return cmd
}

// serverExits maps each command startServer started to a channel closed
// once its Wait has returned: only then may ProcessState be read.
var serverExits sync.Map

// waitExit waits up to 10 s for a command startServer started to exit.
func waitExit(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	exited, ok := serverExits.Load(cmd)
	if !ok {
		t.Fatalf("pid %d was not started by startServer", cmd.Process.Pid)
	}
	select {
	case <-exited.(chan struct{}):
	case <-time.After(10 * time.Second):
		t.Fatalf("pid %d still runs after 10 s", cmd.Process.Pid)
	}
}

// writeTree writes files (slash paths → content) below dir. A content of
// "->target" makes a symlink; a path ending in "/" an empty directory.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case strings.HasSuffix(p, "/"):
			err = os.MkdirAll(full, 0o755)
		case strings.HasPrefix(content, "->"):
			err = os.Symlink(content[2:], full)
		default:
			err = os.WriteFile(full, []byte(content), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func randomBytes(seed int64, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

// run runs a command in dir with extra environment and returns its
// combined output, failing the test on a non-zero exit.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// lineWatch passes a server's standard error through to w and closes seen
// once a line holding want has gone by.
type lineWatch struct {
	w    *os.File
	want string
	seen chan struct{}
	line []byte
}

func (lw *lineWatch) Write(p []byte) (int, error) {
	lw.w.Write(p)
	for _, c := range p {
		if c != '\n' {
			lw.line = append(lw.line, c)
			continue
		}
		if lw.seen != nil && strings.Contains(string(lw.line), lw.want) {
			close(lw.seen)
			lw.seen = nil
		}
		lw.line = lw.line[:0]
	}
	return len(p), nil
}
