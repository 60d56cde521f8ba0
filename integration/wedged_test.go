package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log"
	"net"
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

	"github.com/layerfs/layerfs"
	"github.com/layerfs/layerfs/api"
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
// listens on dir/daemon.sock (and never accepts), serves a LayerFS-typed
// FUSE mount at dir/lower, and has a thread of its own waiting in the
// kernel on a lookup there that its server took and will never answer.
// Killed, such a process cannot finish dying, and its socket stays open.
func wedgeMain(dir string) int {
	if _, err := net.Listen("unix", filepath.Join(dir, "daemon.sock")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
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
	// A client of the wedged daemon's socket, which takes connections
	// and never answers, gives up and says so.
	c := layerfs.Dial(filepath.Join(dir, "daemon.sock"))
	c.QuickTimeout, c.ProbeEvery = 100*time.Millisecond, 50*time.Millisecond
	if _, err := c.List(context.Background()); !errors.Is(err, layerfs.ErrNoAnswer) {
		t.Errorf("list of the wedged daemon: %v, want ErrNoAnswer", err)
	}
	if _, err := c.Exec(context.Background(), "ws-000000000000", api.ExecRequest{Argv: []string{"true"}}); !errors.Is(err, layerfs.ErrNoAnswer) {
		t.Errorf("exec on the wedged daemon: %v, want ErrNoAnswer", err)
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

// TestClientWaitsForAWorkingDaemon: a command that runs through many of
// the Client's health probes is waited for, whole and streamed: the
// daemon answers its health while the command runs.
func TestClientWaitsForAWorkingDaemon(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, map[string]string{"a.txt": "a\n"})
	p := startDaemonProc(t, initStore(t, src), filepath.Join(t.TempDir(), "state"), "--volume=off")
	c := layerfs.Dial(p.socket)
	c.QuickTimeout, c.ProbeEvery = 2*time.Second, 10*time.Millisecond
	ctx := context.Background()
	w, err := c.Create(ctx, api.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Exec(ctx, w.ID, api.ExecRequest{Argv: []string{"sh", "-c", "sleep 0.3; echo done > b.txt; exit 3"}})
	if err != nil || res.ExitCode != 3 {
		t.Errorf("exec: %+v, %v", res, err)
	}
	res, err = c.ExecStream(ctx, w.ID, api.ExecRequest{Argv: []string{"sh", "-c", "sleep 0.3; echo out"}}, nil)
	if err != nil || res.ExitCode != 0 {
		t.Errorf("streamed exec: %+v, %v", res, err)
	}
	if cr, err := c.Commit(ctx, w.ID, api.CommitRequest{}); err != nil || cr.Status != api.StatusCommitted {
		t.Errorf("commit: %+v, %v", cr, err)
	}
	if err := c.End(ctx, w.ID, false); err != nil {
		t.Error(err)
	}
}
