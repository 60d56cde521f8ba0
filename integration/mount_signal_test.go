package integration

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestMountSignalBeforeReady: SIGINT to layerfs mount while its
// background server is starting stops the server too: layerfs mount
// exits 130, and once it has, no server runs and nothing is mounted. The
// server used to go on and mount after its caller died of the signal.
func TestMountSignalBeforeReady(t *testing.T) {
	skipIfIgnored(t, syscall.SIGINT)
	s := lifecycleStore(t)
	interrupted := 0
	for try := 0; try < 8; try++ {
		mnt := newMountpoint(t)
		cmd := exec.Command(layerfsBin, "mount", "--store", s, "main", mnt)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		server := 0
		t.Cleanup(func() {
			if server > 0 && serving(server, mnt) {
				syscall.Kill(server, syscall.SIGKILL)
			}
			if layerfsMounted(mnt) {
				syscall.Unmount(mnt, syscall.MNT_DETACH)
			}
		})
		server = waitChild(t, cmd.Process.Pid)
		// At once, the server dies of the signal before it catches
		// signals; later, it has caught it while it mounts.
		time.Sleep(time.Duration(try) * 10 * time.Millisecond)
		cmd.Process.Signal(syscall.SIGINT)
		err := cmd.Wait()
		var ee *exec.ExitError
		switch {
		case err == nil: // ready before the signal came: a mount like any
			if !layerfsMounted(mnt) {
				t.Errorf("layerfs mount succeeded, but nothing is mounted at %s", mnt)
			}
			unmount(t, mnt)
			continue
		case !errors.As(err, &ee) || ee.ExitCode() != 130:
			t.Errorf("layerfs mount interrupted: %v, want exit 130\n%s", err, stderr.String())
		case !strings.Contains(stderr.String(), "interrupted"):
			t.Errorf("layerfs mount interrupted says: %s", stderr.String())
		}
		interrupted++
		if server > 0 && !gone(server, 10*time.Second) {
			t.Errorf("try %d: the mount server (pid %d) still runs after layerfs mount was interrupted", try, server)
		}
		if layerfsMounted(mnt) {
			t.Errorf("try %d: %s is mounted after layerfs mount was interrupted", try, mnt)
		}
	}
	if interrupted == 0 {
		t.Skip("every mount was ready before its signal")
	}
	t.Logf("%d of 8 mounts interrupted before they were ready", interrupted)
}

// TestMountForegroundSignalAnyTime: SIGINT at any moment of a foreground
// server's start (before it catches signals, it dies of it; after, it
// unmounts and exits 0) leaves nothing mounted.
func TestMountForegroundSignalAnyTime(t *testing.T) {
	skipIfIgnored(t, syscall.SIGINT)
	s := lifecycleStore(t)
	for delay := time.Duration(0); delay <= 100*time.Millisecond; delay += 20 * time.Millisecond {
		mnt := newMountpoint(t)
		cmd := exec.Command(layerfsBin, "mount", "--foreground", "--store", s, "main", mnt)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		t.Cleanup(func() {
			cmd.Process.Kill()
			if layerfsMounted(mnt) {
				syscall.Unmount(mnt, syscall.MNT_DETACH)
			}
		})
		time.Sleep(delay)
		cmd.Process.Signal(syscall.SIGINT)
		select {
		case err := <-exited:
			var ee *exec.ExitError
			if err != nil && !(errors.As(err, &ee) && ee.ProcessState.Sys().(syscall.WaitStatus).Signal() == syscall.SIGINT) {
				t.Errorf("SIGINT after %s: %v, want exit 0 or death by SIGINT", delay, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("SIGINT after %s: the server still runs after 10 s", delay)
		}
		if layerfsMounted(mnt) {
			t.Errorf("SIGINT after %s: still mounted", delay)
		}
	}
}

// TestMountKeepsIgnoredSignalsIgnored: a server started with SIGHUP and
// SIGINT ignored (nohup, a script's background job) leaves them ignored,
// as libfuse does, rather than catching them from whenever it got to it:
// it serves on after them, and SIGTERM still unmounts it.
func TestMountKeepsIgnoredSignalsIgnored(t *testing.T) {
	s := lifecycleStore(t)
	mnt := newMountpoint(t)
	cmd := exec.Command("sh", "-c", `trap "" HUP INT; exec "$@"`, "sh", layerfsBin, "mount", "--foreground", "--store", s, "main", mnt)
	ready := make(chan struct{})
	cmd.Stderr = &lineWatch{w: os.Stderr, want: "serving " + mnt, seen: ready}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		if layerfsMounted(mnt) {
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
	})
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not log that it serves within 10 s")
	}
	cmd.Process.Signal(syscall.SIGHUP)
	cmd.Process.Signal(syscall.SIGINT)
	if got := readString(t, mnt+"/hello.txt"); got != "hello\n" {
		t.Errorf("hello.txt after SIGHUP and SIGINT = %q", got)
	}
	select {
	case err := <-exited:
		t.Fatalf("the server exited after ignored signals: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if !layerfsMounted(mnt) {
		t.Fatal("unmounted after ignored signals")
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("after SIGTERM: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server still runs 10 s after SIGTERM")
	}
	if layerfsMounted(mnt) {
		t.Error("still mounted after SIGTERM")
	}
}

// TestMountRaceLoserExits4: of two layerfs mounts started at once at the
// same mount point, one mounts and the other is refused as already
// mounted, exit 4, whether the caller's check or its server's found the
// first. The server's refusal was exit 1.
func TestMountRaceLoserExits4(t *testing.T) {
	s := lifecycleStore(t)
	for try := 0; try < 6; try++ {
		mnt := newMountpoint(t)
		t.Cleanup(func() { unmount(t, mnt) })
		var wg sync.WaitGroup
		codes := make([]int, 2)
		outs := make([]string, 2)
		for i := range codes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := exec.Command(layerfsBin, "mount", "--store", s, "main", mnt).CombinedOutput()
				outs[i] = string(out)
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					codes[i] = ee.ExitCode()
				} else if err != nil {
					codes[i] = -1
				}
			}()
		}
		wg.Wait()
		if !(codes[0] == 0 && codes[1] == 4 || codes[0] == 4 && codes[1] == 0) {
			t.Errorf("try %d: exits %v, want one 0 and one 4\n%s%s", try, codes, outs[0], outs[1])
		}
		if n := strings.Count(mountTable(t), " "+mnt+" "); n != 1 {
			t.Errorf("try %d: %d mounts at %s, want 1", try, n, mnt)
		}
	}
}

// skipIfIgnored skips a test whose process was started with sig ignored
// (a shell script's background job ignores SIGINT): the processes it
// starts inherit that, and layerfs mount leaves it ignored.
func skipIfIgnored(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if signal.Ignored(sig) {
		t.Skipf("this test process ignores %s, as would the processes it starts", sig)
	}
}

// waitChild waits up to 10 s for pid to start a child process and
// returns its pid, or 0 if pid exited first.
func waitChild(t *testing.T, pid int) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if c := childOf(pid); c > 0 {
			return c
		}
		if gone(pid, 0) {
			return 0
		}
	}
	t.Fatalf("pid %d started no child within 10 s", pid)
	return 0
}

// childOf is a child process of pid, or 0.
func childOf(pid int) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces; it ends at the last ')'.
		i := bytes.LastIndexByte(stat, ')')
		if f := strings.Fields(string(stat[i+1:])); i > 0 && len(f) > 1 && f[1] == strconv.Itoa(pid) {
			return c
		}
	}
	return 0
}

// gone waits up to d for pid to exit: to be gone, or a zombie not yet
// reaped.
func gone(pid int, d time.Duration) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(10 * time.Millisecond) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && len(stat) > i+2 && stat[i+2] == 'Z' {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
	}
}

// serving reports whether pid is still a layerfs mount server of mnt, and
// not another process that took its pid since.
func serving(pid int, mnt string) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && bytes.Contains(cmdline, []byte(mnt))
}
