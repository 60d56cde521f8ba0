package fusefs

import (
	"errors"
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
	"github.com/layerfs/layerfs/store"
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

// startBackground starts the server and waits for its report. A signal
// (sigs) before the report stops it: it is passed on to a server already
// started, which unmounts what it mounted, and once that server is gone
// startBackground returns an *InterruptedError.
func (req Request) startBackground(sigs <-chan os.Signal) error {
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
	if sig := pending(sigs); sig != nil {
		return &InterruptedError{Signal: sig, Mountpoint: req.Mountpoint}
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
	return waitReady(cmd, r, sigs, req.Mountpoint)
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
// failed; its message, if any, says why, and the kind of error it was
// (reportKinds) comes back as such. A signal before the report (sigs) is
// passed on to the server, and waitReady returns an *InterruptedError once
// the server is gone.
func waitReady(cmd *exec.Cmd, r io.Reader, sigs <-chan os.Signal, mnt string) error {
	msgs := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		msgs <- string(b)
	}()
	select {
	case msg := <-msgs:
		if msg == readyMessage {
			if sig := pending(sigs); sig != nil {
				return stopServer(cmd, sig, sigs, mnt) // ready, but too late
			}
			return cmd.Process.Release()
		}
		werr := cmd.Wait()
		if msg == "" && werr != nil {
			msg = werr.Error()
		}
		return serverError(msg)
	case sig := <-sigs:
		return stopServer(cmd, sig, sigs, mnt)
	case <-time.After(readyTimeout):
		cmd.Process.Kill()
		cmd.Wait()
		return fmt.Errorf("%w: not ready after %s", ErrServerFailed, readyTimeout)
	}
}

// stopServer passes sig on to the server, and each later signal too (a
// second one makes it detach a busy mount without waiting), and waits for
// it to exit. A server that had not yet caught signals dies of it before
// it mounts anything; one that had unmounts what it mounted, as it does
// for a signal while it serves.
func stopServer(cmd *exec.Cmd, sig os.Signal, sigs <-chan os.Signal, mnt string) error {
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	for {
		cmd.Process.Signal(sig)
		select {
		case <-exited:
			return &InterruptedError{Signal: sig, Mountpoint: mnt}
		case sig = <-sigs:
		}
	}
}

// pending returns a signal already caught on sigs, or nil.
func pending(sigs <-chan os.Signal) os.Signal {
	select {
	case sig := <-sigs:
		return sig
	default:
		return nil
	}
}

// reportKinds are the errors a server's failed report names by kind, so
// its caller returns an error of that kind: the loser of two mounts racing
// for one mount point is ErrMounted, as a mount refused by the caller's
// own checks is.
var reportKinds = []struct {
	name string
	err  error
}{
	{"mounted", ErrMounted},
	{"bad-option", ErrBadOption},
	{"not-found", store.ErrNotFound},
	{"bad-path", store.ErrBadPath},
	{"unsupported", store.ErrUnsupported},
	{"newer-format", store.ErrNewerFormat},
	{"not-store", store.ErrNotStore},
	{"corrupt", store.ErrCorrupt},
}

// kindPrefix starts a failed report that names its kind: the prefix, the
// kind's name, a newline, then the message.
const kindPrefix = "kind:"

// report is what a server tells its caller of err: its kind, if it is one
// of reportKinds, and its message.
func report(err error) string {
	for _, k := range reportKinds {
		if errors.Is(err, k.err) {
			return kindPrefix + k.name + "\n" + err.Error()
		}
	}
	return err.Error()
}

// serverError is the error a server's failed report describes.
func serverError(msg string) error {
	if rest, ok := strings.CutPrefix(msg, kindPrefix); ok {
		name, text, _ := strings.Cut(rest, "\n")
		for _, k := range reportKinds {
			if k.name == name {
				return &reportedError{msg: strings.TrimSpace(text), kind: k.err}
			}
		}
		msg = text
	}
	return fmt.Errorf("%w: %s", ErrServerFailed, strings.TrimSpace(msg))
}

// reportedError is an error a server reported, of a kind it named.
type reportedError struct {
	msg  string
	kind error
}

func (e *reportedError) Error() string { return e.msg }
func (e *reportedError) Unwrap() error { return e.kind }

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
		f.WriteString(report(err))
	}
	f.Close()
}
