package integration

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/sessions"
)

// wedgeEnv makes the test binary run wedgeMain on the state directory it
// names.
const wedgeEnv = "LAYERFS_TEST_WEDGE"

// stuckRoot is a FUSE root whose lookups never answer.
type stuckRoot struct{ gofs.Inode }

func (r *stuckRoot) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	select {}
}

// wedgeMain plays a daemon about to wedge: it holds dir's daemon.lock,
// serves a LayerFS-typed FUSE mount at dir/lower, and has a thread of its
// own waiting in the kernel on a lookup there that its server took and
// will never answer. Killed, such a process cannot finish dying.
func wedgeMain(dir string) int {
	lock, err := os.OpenFile(filepath.Join(dir, "daemon.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err == nil {
		err = unix.Flock(int(lock.Fd()), unix.LOCK_EX)
	}
	if err == nil {
		_, err = lock.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	mnt := filepath.Join(dir, "lower")
	if err == nil {
		err = os.MkdirAll(mnt, 0o755)
	}
	var server *fuse.Server
	if err == nil {
		server, err = gofs.Mount(mnt, &stuckRoot{}, &gofs.Options{MountOptions: fuse.MountOptions{DirectMount: true, Name: "layerfs", FsName: "wedge"}})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_ = server
	go os.Stat(filepath.Join(mnt, "x")) // never returns
	time.Sleep(200 * time.Millisecond)
	fmt.Println("ready")
	select {}
}

// TestRescueWedgedDaemon: a daemon killed while one of its threads waits
// on its own FUSE mount never finishes dying, holding the state
// directory; RescueWedged aborts that mount's FUSE connection, and the
// process goes.
func TestRescueWedgedDaemon(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), wedgeEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(dir, "lower")
	t.Cleanup(func() {
		cmd.Process.Kill()
		unix.Unmount(mnt, unix.MNT_DETACH)
	})
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		t.Fatalf("the wedging process: %q", line)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-waited:
		t.Skip("the killed process finished dying on its own: this kernel does not wedge so")
	case <-time.After(time.Second):
	}
	if err := sessions.RescueWedged(dir, log.New(os.Stderr, "rescue: ", 0)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("the wedged process is still there after the rescue")
	}
	// The state directory is free for the next daemon.
	lock, err := os.Open(filepath.Join(dir, "daemon.lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatalf("the lock after the rescue: %v", err)
	}
}
