package fusefs

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/object"
)

// A background server is this executable started again with the same
// arguments and two variables: the descriptor of a pipe on which it reports
// "ready" (or why it failed) and the Commit the caller resolved, so a branch
// that moves meanwhile does not change what is mounted.
const (
	readyFDEnv   = "LAYERFS_MOUNT_READY_FD"
	pinEnv       = "LAYERFS_MOUNT_COMMIT"
	readyMessage = "ready\n"
	readyTimeout = time.Minute
)

// startBackground starts the server and waits for its report.
func (req Request) startBackground() error {
	// Refused here, what the server would refuse is an error of its kind,
	// not a message the server wrote (a stale mount is the server's to
	// detach).
	if mnt, err := filepath.Abs(req.Mountpoint); err == nil && !stale(mnt) {
		if err := checkMountpoint(mnt); err != nil {
			return err
		}
		if err := checkStoreOutside(req.StorePath, mnt); err != nil {
			return err
		}
	}
	commit, err := req.pin()
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("start mount server: %w", err)
	}
	args := req.Args
	if args == nil {
		args = os.Args[1:]
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("start mount server: %w", err)
	}
	defer r.Close()
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), readyFDEnv+"=3", pinEnv+"="+commit.String())
	cmd.ExtraFiles = []*os.File{w}
	cmd.Stderr = backgroundStderr()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	w.Close()
	if err != nil {
		return fmt.Errorf("start mount server: %w", err)
	}
	return waitReady(cmd, r)
}

// backgroundStderr lets the server log to the caller's terminal, if it has
// one; any other stderr (a pipe, a file) is left alone, so that whoever
// reads it is not kept waiting by a server that outlives the command.
func backgroundStderr() io.Writer {
	if st, err := os.Stderr.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
		return os.Stderr
	}
	return nil
}

// waitReady reads the server's report. A server that exits without one
// failed; its message, if any, says why.
func waitReady(cmd *exec.Cmd, r io.Reader) error {
	msgs := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		msgs <- string(b)
	}()
	select {
	case msg := <-msgs:
		if msg == readyMessage {
			return cmd.Process.Release()
		}
		werr := cmd.Wait()
		if msg == "" && werr != nil {
			msg = werr.Error()
		}
		return fmt.Errorf("%w: %s", ErrServerFailed, strings.TrimSpace(msg))
	case <-time.After(readyTimeout):
		cmd.Process.Kill()
		cmd.Wait()
		return fmt.Errorf("%w: not ready after %s", ErrServerFailed, readyTimeout)
	}
}

// backgroundChild returns the report pipe and pinned Commit when this
// process is a background server, and clears them from the environment so
// that nothing it starts inherits them.
func backgroundChild() (*os.File, object.ID) {
	fdText, ok := os.LookupEnv(readyFDEnv)
	if !ok {
		return nil, object.Zero
	}
	pin, _ := object.Parse(os.Getenv(pinEnv))
	os.Unsetenv(readyFDEnv)
	os.Unsetenv(pinEnv)
	fd, err := strconv.Atoi(fdText)
	if err != nil {
		fd = -1
	}
	closeInherited(fd)
	if fd < 0 {
		return nil, pin
	}
	return os.NewFile(uintptr(fd), "mount-ready"), pin
}

// closeInherited closes the descriptors this server inherited by accident,
// all but stdin, stdout, stderr and keep: the caller's own, not marked
// close-on-exec — a shell's 7>&1, a pipe a build tool reads until every
// writer is gone — would stay open as long as the mount. Go opens its
// own with close-on-exec, so those are left alone.
func closeInherited(keep int) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= 2 || fd == keep {
			continue
		}
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
			unix.Close(fd)
		}
	}
}

// notifyReady reports to the caller that started this server, if any.
func notifyReady(f *os.File, err error) {
	if f == nil {
		return
	}
	if err == nil {
		f.WriteString(readyMessage)
	} else {
		f.WriteString(err.Error())
	}
	f.Close()
}
