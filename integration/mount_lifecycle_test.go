package integration

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// lifecycleStore is a small captured tree for the lifecycle tests.
func lifecycleStore(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	writeTree(t, src, map[string]string{"hello.txt": "hello\n", "dir/nested.txt": "nested\n"})
	return initStore(t, src)
}

func newMountpoint(t *testing.T) string {
	t.Helper()
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	return mnt
}

// TestMountSIGTERMUnmounts stops a foreground server with SIGTERM (and
// others with SIGINT and SIGHUP, what a closed terminal sends): each
// unmounts and exits 0.
func TestMountSIGTERMUnmounts(t *testing.T) {
	s := lifecycleStore(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		mnt := newMountpoint(t)
		cmd := startServer(t, s, "main", mnt)
		if got := readString(t, filepath.Join(mnt, "hello.txt")); got != "hello\n" {
			t.Errorf("hello.txt = %q", got)
		}
		cmd.Process.Signal(sig)
		waitExit(t, cmd)
		if !cmd.ProcessState.Success() {
			t.Errorf("%s: server exited with %v", sig, cmd.ProcessState)
		}
		if layerfsMounted(mnt) {
			t.Errorf("%s: still mounted", sig)
		}
	}
}

// TestMountSIGTERMWhileBusy signals a server whose mount has an open file:
// the mount is detached at once and the server exits when the file is
// closed.
func TestMountSIGTERMWhileBusy(t *testing.T) {
	mnt := newMountpoint(t)
	cmd := startServer(t, lifecycleStore(t), "main", mnt)
	f, err := os.Open(filepath.Join(mnt, "hello.txt"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	waitMounted(t, mnt, false)
	if b, err := io.ReadAll(f); err != nil || string(b) != "hello\n" {
		t.Errorf("read of a file open across the unmount: %q, %v", b, err)
	}
	f.Close()
	waitExit(t, cmd)
}

// TestMountSIGTERMWithCopyElsewhere signals a server whose mount was copied
// into another mount namespace (unshare with private propagation), which
// the unmount here does not reach: the server still exits, soon.
func TestMountSIGTERMWithCopyElsewhere(t *testing.T) {
	mnt := newMountpoint(t)
	cmd := startServer(t, lifecycleStore(t), "main", mnt)
	holder := exec.Command("unshare", "--mount", "--propagation", "private", "sleep", "60")
	if err := holder.Start(); err != nil {
		t.Skipf("unshare: %v", err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", holder.Process.Pid)); ns != "" && ns != selfMountNS() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("unshare did not make a mount namespace")
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	waitExit(t, cmd)
	if layerfsMounted(mnt) {
		t.Error("still mounted here")
	}
}

func selfMountNS() string {
	ns, _ := os.Readlink("/proc/self/ns/mnt")
	return ns
}

// TestMountAfterKill9 kills a server with SIGKILL, leaving its mount
// stale (ENOTCONN), and mounts again at the same place.
func TestMountAfterKill9(t *testing.T) {
	s := lifecycleStore(t)
	mnt := newMountpoint(t)
	cmd := startServer(t, s, "main", mnt)
	cmd.Process.Kill()
	waitExit(t, cmd)
	if _, err := os.Stat(filepath.Join(mnt, "hello.txt")); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("stat in a dead server's mount: %v, want ENOTCONN", err)
	}
	runLayerfs(t, "mount", "--store", s, "main", mnt)
	t.Cleanup(func() { unmount(t, mnt) })
	if got := readString(t, filepath.Join(mnt, "hello.txt")); got != "hello\n" {
		t.Errorf("after remounting: %q", got)
	}
	if n := strings.Count(mountTable(t), " "+mnt+" "); n != 1 {
		t.Errorf("%d mounts at %s, want 1 (the stale one detached)", n, mnt)
	}
}

// TestMountServerKeepsNoInheritedFiles: the background server does not
// hold what its caller inherited beyond stdin, stdout and stderr, such as
// the write end of a pipe a shell passes as fd 7: whoever reads the pipe
// gets EOF once layerfs mount returns, not when the mount goes away.
func TestMountServerKeepsNoInheritedFiles(t *testing.T) {
	s := lifecycleStore(t)
	mnt := newMountpoint(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(layerfsBin, "mount", "--store", s, "main", mnt)
	cmd.ExtraFiles = []*os.File{4: w} // fd 7; 3 is where the server's report pipe goes
	err = cmd.Run()
	w.Close()
	t.Cleanup(func() { unmount(t, mnt) })
	if err != nil {
		t.Fatalf("layerfs mount: %v", err)
	}
	r.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := r.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("read of a pipe whose write end the caller passed on: %d bytes, %v; want EOF (the server holds it)", n, err)
	}
}

// TestMountServerLeavesItsCallersDirectory: a server started from inside
// another mount does not keep it busy: its working directory is not the
// caller's once it serves.
func TestMountServerLeavesItsCallersDirectory(t *testing.T) {
	s := lifecycleStore(t)
	outer := mountStore(t, s, "main")
	inner := newMountpoint(t)
	cmd := exec.Command(layerfsBin, "mount", "--store", s, "main", inner)
	cmd.Dir = filepath.Join(outer, "dir")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("layerfs mount from inside another mount: %v %s", err, out)
	}
	t.Cleanup(func() { unmount(t, inner) })
	if out, err := exec.Command(layerfsBin, "umount", outer).CombinedOutput(); err != nil {
		t.Errorf("umount of the mount the second server was started in: %v %s", err, out)
	}
	if got := readString(t, filepath.Join(inner, "hello.txt")); got != "hello\n" {
		t.Errorf("the second mount: %q", got)
	}
}

// TestMountTwiceIsRefused: a second mount at a live mount's place fails
// and leaves the first alone.
func TestMountTwiceIsRefused(t *testing.T) {
	s := lifecycleStore(t)
	mnt := mountStore(t, s, "main")
	out, err := exec.Command(layerfsBin, "mount", "--store", s, "main", mnt).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "already mounted") {
		t.Errorf("second mount: %v %s", err, out)
	}
	if got := readString(t, filepath.Join(mnt, "hello.txt")); got != "hello\n" {
		t.Errorf("first mount after the refusal: %q", got)
	}
}

// TestMountErrors: a bad ref and a missing Store fail before anything is
// mounted, with the CLI's exit codes; umount refuses what layerfs did not
// mount.
func TestMountErrors(t *testing.T) {
	s := lifecycleStore(t)
	mnt := newMountpoint(t)
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"mount", "--store", s, "nope", mnt}, 3},
		{[]string{"mount", "--store", filepath.Join(t.TempDir(), "missing.layerfs"), "main", mnt}, 3},
		{[]string{"mount", "--store", s, "-o", "frobnicate", "main", mnt}, 2},
		{[]string{"umount", mnt}, 3},
		{[]string{"umount", "/proc"}, 3},
	} {
		err := exec.Command(layerfsBin, c.args...).Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != c.code {
			t.Errorf("layerfs %s: %v, want exit %d", strings.Join(c.args, " "), err, c.code)
		}
	}
	if layerfsMounted(mnt) {
		t.Error("a failed mount left a mount")
	}
}

// TestMountHelperThroughMount8 runs mount -t fuse.layerfs STORE#REF, which
// needs the helper where mount(8) looks for it: the test installs it in
// /sbin for its duration (moving aside one already there) and removes it.
func TestMountHelperThroughMount8(t *testing.T) {
	installHelper(t)
	s := lifecycleStore(t)
	mnt := newMountpoint(t)
	run(t, "/", nil, "mount", "-t", "fuse.layerfs", "-o", "ro,cache_size=32M", s+"#main", mnt)
	t.Cleanup(func() { unmount(t, mnt) })
	if got := readString(t, filepath.Join(mnt, "dir", "nested.txt")); got != "nested\n" {
		t.Errorf("nested.txt = %q", got)
	}
	if info := mountTable(t); !strings.Contains(info, " "+mnt+" ") || !strings.Contains(info, "fuse.layerfs "+s) {
		t.Errorf("/proc/self/mountinfo does not show a fuse.layerfs mount of %s at %s", s, mnt)
	}
	run(t, "/", nil, "umount", mnt)
	waitMounted(t, mnt, false)

	run(t, "/", nil, "mount", "-t", "fuse.layerfs", s, mnt) // a Store alone: all Commits
	if _, err := os.Readlink(filepath.Join(mnt, "branches", "main")); err != nil {
		t.Errorf("all-commits mount through mount(8): %v", err)
	}
}

const helperPath = "/sbin/mount.fuse.layerfs"

func installHelper(t *testing.T) {
	t.Helper()
	built := filepath.Join(filepath.Dir(layerfsBin), "mount.fuse.layerfs")
	data, err := os.ReadFile(built)
	if err != nil {
		t.Fatal(err)
	}
	aside := helperPath + ".before-test"
	if _, err := os.Lstat(helperPath); err == nil {
		if err := os.Rename(helperPath, aside); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		os.Remove(helperPath)
		os.Rename(aside, helperPath) // fails harmlessly when there was none
	})
	if err := os.WriteFile(helperPath, data, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mountTable(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(b), `\043`, "#")
}

// TestUmountBusy: umount of a mount in use is refused as in use (exit 4),
// naming --lazy, and leaves the mount serving.
func TestUmountBusy(t *testing.T) {
	s := lifecycleStore(t)
	mnt := mountStore(t, s, "main")
	f, err := os.Open(filepath.Join(mnt, "hello.txt"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(layerfsBin, "umount", mnt).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 4 || !strings.Contains(string(out), "--lazy") {
		t.Errorf("umount of a busy mount: %v %s", err, out)
	}
	f.Close()
	if got := readString(t, filepath.Join(mnt, "hello.txt")); got != "hello\n" {
		t.Errorf("after the refused umount: %q", got)
	}
}
