package sessions

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/store"
)

// outputGrace is how long exec waits, after its command exits, for more
// output from processes the command left running: output already written
// is always read, however long that takes on a busy machine.
const outputGrace = 250 * time.Millisecond

// maxTimeoutMS is the longest timeout, in milliseconds, a time.Duration
// holds.
const maxTimeoutMS = math.MaxInt64 / int64(time.Millisecond)

// Exec runs a command in a Workspace's namespace. When stream is set it
// receives output as it comes, and the result carries none.
func (d *Daemon) Exec(ctx context.Context, id string, req api.ExecRequest, stream func(api.ExecEvent)) (api.ExecResult, error) {
	w, err := d.get(id)
	if err != nil {
		return api.ExecResult{}, err
	}
	if err := checkExec(req); err != nil {
		return api.ExecResult{}, err
	}
	d.metrics.execs.Add(1)
	w.aheadOfCommand()
	return w.exec(ctx, req, stream)
}

// checkExec refuses a request that cannot be run as asked.
func checkExec(req api.ExecRequest) error {
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return fmt.Errorf("%w: exec needs argv", ErrBadRequest)
	}
	if req.TimeoutMS < 0 {
		return fmt.Errorf("%w: timeout_ms %d: want 0 (none) or more", ErrBadRequest, req.TimeoutMS)
	}
	for _, kv := range req.Env {
		if !strings.Contains(kv, "=") {
			return fmt.Errorf("%w: env %q: want KEY=VALUE", ErrBadRequest, kv)
		}
		if strings.IndexByte(kv, 0) >= 0 { // exec.Cmd's start fails, not as the request's fault
			return fmt.Errorf("%w: env %q holds a NUL byte", ErrBadRequest, kv)
		}
	}
	return nil
}

func (w *workspace) exec(ctx context.Context, req api.ExecRequest, stream func(api.ExecEvent)) (api.ExecResult, error) {
	// One longer than a time.Duration holds (292 years) is none: it would
	// wrap round to a negative one, and kill the command at once.
	if req.TimeoutMS > 0 && req.TimeoutMS <= maxTimeoutMS {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutMS)*time.Millisecond)
		defer cancel()
	}
	out := newOutput(stream)
	start := time.Now()
	cmd, pipes, err := w.start(req, out)
	if err != nil {
		return api.ExecResult{}, err
	}
	// Waited for here, not on a goroutine of its own: one hand-off less
	// between the command's exit and the reply. A cancelled request (the
	// client went away) or the timeout kills the whole process group.
	stop := context.AfterFunc(ctx, func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	waitErr := cmd.Wait()
	killed := !stop()
	timedOut := killed && errors.Is(ctx.Err(), context.DeadlineExceeded)
	if killed {
		waitGroupGone(cmd.Process.Pid)
	}
	for _, p := range pipes {
		p.exited()
	}
	for _, p := range pipes {
		<-p.done
	}
	res := out.result()
	res.DurationMS = float64(time.Since(start).Microseconds()) / 1000
	res.TimedOut = timedOut
	res.ExitCode = exitCode(cmd, waitErr)
	return res, nil
}

// groupGoneWait bounds how long exec waits for the process group it
// killed to be gone.
const groupGoneWait = 2 * time.Second

// waitGroupGone waits, up to groupGoneWait, until process group pgid,
// which was sent SIGKILL, has no live process left. Wait returns once
// the command's own process is reaped, while the others of its group may
// still be on their way out: a commit right after the reply counted them
// as commands still running and was refused. Zombies do not count: the
// commit does not count them (they have left their cgroup and
// namespaces), and whoever reaps orphans may take its time.
func waitGroupGone(pgid int) {
	for deadline := time.Now().Add(groupGoneWait); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if !liveInGroup(pgid) {
			return
		}
	}
}

// liveInGroup reports whether process group pgid has a process that has
// not exited yet.
func liveInGroup(pgid int) bool {
	if syscall.Kill(-pgid, 0) != nil {
		return false // ESRCH: nothing at all, zombies neither
	}
	names, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	group := strconv.Itoa(pgid)
	for _, e := range names {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone
		}
		// "pid (comm) state ppid pgrp ...": comm may hold anything.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) >= 3 && f[2] == group && f[0] != "Z" && f[0] != "X" {
			return true
		}
	}
	return false
}

// outPipe carries a command's stdout or stderr to the output. It is read
// until every process holding it has closed it or, once the command has
// exited, until it stays silent for outputGrace: a process the command
// left in the background may hold it open for as long as it runs.
// (exec.Cmd's WaitDelay would close it outputGrace after the exit even
// with output still unread in it, which on a busy machine lost a
// command's whole output now and then.)
type outPipe struct {
	r, w *os.File
	gone atomic.Bool // the command exited
	done chan struct{}
}

func newOutPipe() (*outPipe, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	return &outPipe{r: r, w: w, done: make(chan struct{})}, nil
}

// outBufs recycles the pipes' read buffers: two per command, they were
// a fifth of what a Workspace's edit lifecycle allocated.
var outBufs = sync.Pool{New: func() any { return new([64 << 10]byte) }}

// copy reads the pipe into dst until it ends (see outPipe).
func (p *outPipe) copy(dst *streamWriter) {
	defer close(p.done)
	defer dst.flush()
	defer p.r.Close()
	bp := outBufs.Get().(*[64 << 10]byte)
	defer outBufs.Put(bp)
	buf := bp[:]
	for {
		n, err := p.r.Read(buf)
		if n > 0 {
			dst.Write(buf[:n])
			if p.gone.Load() {
				p.r.SetReadDeadline(time.Now().Add(outputGrace))
			}
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			p.drain(dst, buf) // silence after the exit
			return
		}
		if err != nil {
			return // the end
		}
	}
}

// drain reads what the pipe holds now into dst, without waiting for more.
// A read past its deadline fails before it looks, and the grace period can
// pass while this goroutine waits for a core (hundreds of commands ending
// at once on two): what the command wrote before it exited is still there.
func (p *outPipe) drain(dst *streamWriter, buf []byte) {
	rc, err := p.r.SyscallConn()
	if err != nil || p.r.SetReadDeadline(time.Time{}) != nil {
		return
	}
	rc.Read(func(fd uintptr) bool {
		for {
			n, err := unix.Read(int(fd), buf)
			if n <= 0 || err != nil {
				return true // EAGAIN: empty; 0: no writer left
			}
			dst.Write(buf[:n])
		}
	})
}

// exited starts the grace period: from now on the pipe is read only while
// output keeps coming.
func (p *outPipe) exited() {
	p.gone.Store(true)
	p.r.SetReadDeadline(time.Now().Add(outputGrace))
}

// What start's check of a cwd in the namespace found, for its errors.
var (
	errCwdMissing = errors.New("no such directory")
	errCwdLeaves  = errors.New("leaves the Workspace")
)

// start starts the command from inside the Workspace's namespace, under
// the read lock, so a commit cannot swap the view while it starts. Its
// stdout and stderr are pipes being read into out. If the Workspace's
// path there no longer shows its view (exec_view.go), it attaches the
// view again first.
func (w *workspace) start(req api.ExecRequest, out *output) (*exec.Cmd, []*outPipe, error) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.holder == nil {
		return nil, nil, fmt.Errorf("workspace %s: %w", w.rec.ID, ErrNotFound)
	}
	cmd, pipes, err := w.startOnce(req, out)
	if err == errViewGone {
		if err := w.reattach(); err != nil {
			return nil, nil, fmt.Errorf("workspace %s: %w: %w", w.rec.ID, errViewGone, err)
		}
		cmd, pipes, err = w.startOnce(req, out)
	}
	return cmd, pipes, err
}

// startOnce is start's attempt. Callers hold w.mu for reading.
func (w *workspace) startOnce(req api.ExecRequest, out *output) (*exec.Cmd, []*outPipe, error) {
	dir, beneath := w.rec.Path, ""
	if req.Cwd != "" {
		dir = req.Cwd
		if !path.IsAbs(dir) {
			dir, beneath = path.Join(w.rec.Path, dir), path.Clean(dir)
			if dir != w.rec.Path && !strings.HasPrefix(dir, strings.TrimSuffix(w.rec.Path, "/")+"/") {
				return nil, nil, fmt.Errorf("%w: cwd %q leaves the Workspace", ErrBadRequest, req.Cwd)
			}
		}
	}
	stdin, err := stdinOf(req)
	if err != nil {
		return nil, nil, err
	}
	stdout, err := newOutPipe()
	if err != nil {
		return nil, nil, err
	}
	stderr, err := newOutPipe()
	if err != nil {
		stdout.r.Close()
		stdout.w.Close()
		return nil, nil, err
	}
	view := w.viewID()
	cgroup := w.d.reaper.track(w.holder.ns)
	var cmd *exec.Cmd
	err = w.holder.inNamespace(req.IsolateNetwork, func() error {
		if !view.shownAt(w.rec.Path) {
			return errViewGone
		}
		// Else the start fails naming the program, not the directory.
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return errCwdMissing
		}
		// A relative cwd stays in the Workspace through symlinks too.
		if beneath != "" && beneath != "." && !resolvesBeneath(w.rec.Path, beneath) {
			return errCwdLeaves
		}
		// Look the program up here, so a path inside the Workspace works.
		newCmd := func(cgroup int) *exec.Cmd {
			cmd := command(req.Argv, req.Env)
			cmd.Dir = dir
			cmd.Env = req.Env
			if stdin != nil { // else /dev/null
				cmd.Stdin = bytes.NewReader(stdin)
			}
			cmd.Stdout, cmd.Stderr = stdout.w, stderr.w
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if cgroup >= 0 {
				cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, cgroup
			}
			// Only stdin goes through a goroutine of exec's: once the
			// command exits, a background process holding stdin unread
			// must not keep Wait from returning.
			cmd.WaitDelay = outputGrace
			return cmd
		}
		cmd = newCmd(cgroup)
		err := cmd.Start()
		if err != nil && cgroup >= 0 && cgroupRefusal(err) {
			// Perhaps the kernel would not start it in the cgroup (one
			// with controllers and processes of its own, say). If it
			// starts without, so do the next ones; if not, the error
			// was the command's.
			retry := newCmd(-1)
			if retry.Start() == nil {
				w.d.log.Printf("commands start outside cgroups from now on: %v", err)
				w.d.reaper.noCgroups()
				cmd, err = retry, nil
			}
		}
		return err
	})
	if cgroup >= 0 {
		unix.Close(cgroup)
	}
	stdout.w.Close() // the command's copies are its own now
	stderr.w.Close()
	if err != nil {
		stdout.r.Close()
		stderr.r.Close()
		if err == errViewGone {
			return nil, nil, err
		}
		if err == errCwdMissing {
			return nil, nil, notFound("cwd " + dir + ": no such directory")
		}
		if err == errCwdLeaves {
			return nil, nil, fmt.Errorf("%w: cwd %q leaves the Workspace (through a symlink)", ErrBadRequest, req.Cwd)
		}
		switch {
		case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
			return nil, nil, fmt.Errorf("%w: start %s: %v", ErrNoCommand, req.Argv[0], err)
		case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.ENOEXEC), errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ETXTBSY):
			return nil, nil, fmt.Errorf("%w: start %s: %v", ErrCannotRun, req.Argv[0], err)
		case requestsFault(err):
			return nil, nil, fmt.Errorf("%w: start %s: %v", ErrBadRequest, req.Argv[0], err)
		}
		// The machine's (EAGAIN, ENOMEM, EMFILE, a network namespace that
		// could not be made): not the request's.
		return nil, nil, fmt.Errorf("start %s: %w", req.Argv[0], err)
	}
	go stdout.copy(out.writer("stdout"))
	go stderr.copy(out.writer("stderr"))
	return cmd, []*outPipe{stdout, stderr}, nil
}

// command is exec.Command for argv, its program looked up as the
// command's own shell would: in the PATH of env, the environment it runs
// with, if that sets one (exec.Command looks in the daemon's). A name
// with a slash in it is a path, and so is not looked up.
func command(argv, env []string) *exec.Cmd {
	name := argv[0]
	dirs, set := "", false
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			dirs, set = v, true // the last one counts, as exec.Cmd keeps it
		}
	}
	if !set || strings.Contains(name, "/") {
		return exec.Command(name, argv[1:]...)
	}
	for _, dir := range filepath.SplitList(dirs) {
		if !filepath.IsAbs(dir) {
			continue // relative to the cwd: exec.LookPath refuses those too
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			cmd := exec.Command(p, argv[1:]...) // a path: not looked up again
			cmd.Args[0] = name
			return cmd
		}
	}
	cmd := exec.Command(name, argv[1:]...)
	cmd.Path, cmd.Err = name, &exec.Error{Name: name, Err: exec.ErrNotFound}
	return cmd
}

// requestsFault reports whether a start's error comes from what the
// request asked for: an argument list or a name too long, a path through
// something that is not a directory or through too many symlinks, or an
// argument or variable that cannot be passed (a NUL byte in it: EINVAL).
func requestsFault(err error) bool {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return false
	}
	switch errno {
	case syscall.E2BIG, syscall.ENAMETOOLONG, syscall.ENOTDIR, syscall.ELOOP, syscall.EINVAL:
		return true
	}
	return false
}

// cgroupRefusal reports whether a start's error is one the kernel gives
// for a cgroup it will not start a process in (one with controllers and
// processes of its own, one being removed, no clone3), rather than the
// command's own, or a passing one (EAGAIN, ETXTBSY).
func cgroupRefusal(err error) bool {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return false
	}
	switch errno {
	case syscall.EBUSY, syscall.EOPNOTSUPP, syscall.ENOSYS, syscall.ENODEV, syscall.EPERM, syscall.EINVAL, syscall.ENOENT, syscall.EACCES:
		return true // EACCES and ENOENT may be the command's: then the retry fails too
	}
	return false
}

// stdinOf is the request's stdin: nil for none.
func stdinOf(req api.ExecRequest) ([]byte, error) {
	switch {
	case req.Stdin != "" && req.StdinBase64 != "":
		return nil, fmt.Errorf("%w: stdin and stdin_base64 both set: send one", ErrBadRequest)
	case req.StdinBase64 != "":
		data, err := base64.StdEncoding.DecodeString(req.StdinBase64)
		if err != nil {
			return nil, fmt.Errorf("%w: stdin_base64: %v", ErrBadRequest, err)
		}
		return data, nil
	case req.Stdin != "":
		return []byte(req.Stdin), nil
	}
	return nil, nil
}

// exitCode is the command's exit status as a shell reports it (128+N for
// signal N), whatever Wait said about output left open.
func exitCode(cmd *exec.Cmd, err error) int {
	ps := cmd.ProcessState
	if ps == nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return -1
		}
		ps = ee.ProcessState
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// output collects a command's stdout and stderr, or streams them.
type output struct {
	mu             sync.Mutex
	stream         func(api.ExecEvent)
	stdout, stderr bytes.Buffer
	truncated      bool
}

func newOutput(stream func(api.ExecEvent)) *output { return &output{stream: stream} }

// writer is where one of the command's streams goes. Its flush sends what
// a stream held back; call it once the stream has ended.
func (o *output) writer(name string) *streamWriter {
	return &streamWriter{o: o, name: name}
}

// A streamWriter writes one of a command's streams to its output. When
// streaming, it holds back the bytes of a character cut at the end of a
// read, so that text goes out as text (ExecEvent.Data); a piece that is
// not UTF-8 goes out as base64.
type streamWriter struct {
	o       *output
	name    string
	pending []byte // the start of a character cut by the last read
	cut     bool   // the stream reached api.MaxOutput, unstreamed
}

func (sw *streamWriter) Write(p []byte) (int, error) {
	o := sw.o
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stream == nil {
		buf := &o.stdout
		if sw.name == "stderr" {
			buf = &o.stderr
		}
		if sw.cut {
			return len(p), nil // what follows the cut is dropped
		}
		room := api.MaxOutput - buf.Len()
		buf.Write(p[:min(len(p), room)])
		if len(p) > room {
			// Cut at a character's start, so that text stays text
			// (the last write may have filled the buffer to the byte).
			buf.Truncate(cutCharacter(buf.Bytes()))
			sw.cut, o.truncated = true, true
		}
		return len(p), nil
	}
	data := p
	if len(sw.pending) > 0 {
		data = append(sw.pending, p...)
		sw.pending = nil
	}
	if cut := cutCharacter(data); cut < len(data) && utf8.Valid(data[:cut]) {
		sw.pending = append([]byte(nil), data[cut:]...)
		data = data[:cut]
	}
	sw.send(data)
	return len(p), nil
}

// flush sends what Write held back: a character the stream never
// finished, as base64.
func (sw *streamWriter) flush() {
	sw.o.mu.Lock()
	defer sw.o.mu.Unlock()
	if sw.o.stream != nil && len(sw.pending) > 0 {
		sw.send(sw.pending)
		sw.pending = nil
	}
}

// send streams data, as text if it is UTF-8. Called with o.mu held.
func (sw *streamWriter) send(data []byte) {
	if len(data) == 0 {
		return
	}
	ev := api.ExecEvent{Stream: sw.name}
	if utf8.Valid(data) {
		ev.Data = string(data)
	} else {
		ev.DataBase64 = base64.StdEncoding.EncodeToString(data)
	}
	sw.o.stream(ev)
}

// cutCharacter returns where the last character of p starts if p ends
// inside it (the start of a multi-byte character, cut short), else
// len(p).
func cutCharacter(p []byte) int {
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax; i-- {
		if utf8.RuneStart(p[i]) {
			if !utf8.FullRune(p[i:]) {
				return i
			}
			break
		}
	}
	return len(p)
}

func (o *output) result() api.ExecResult {
	o.mu.Lock()
	defer o.mu.Unlock()
	r := api.ExecResult{Truncated: o.truncated}
	r.Stdout, r.StdoutBase64 = textOrBase64(o.stdout.Bytes())
	r.Stderr, r.StderrBase64 = textOrBase64(o.stderr.Bytes())
	return r
}

// textOrBase64 puts data in the first result if it is UTF-8 text, else
// as base64 in the second.
func textOrBase64(data []byte) (text, b64 string) {
	if utf8.Valid(data) {
		return string(data), ""
	}
	return "", base64.StdEncoding.EncodeToString(data)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// resolvesBeneath reports whether rel, below root, resolves to a
// directory beneath root, symlinks and all (openat2 RESOLVE_BENEATH).
// Without openat2 (Linux < 5.6) it does not check.
func resolvesBeneath(root, rel string) bool {
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(rfd)
	fd, err := unix.Openat2(rfd, rel, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH})
	if errors.Is(err, unix.ENOSYS) {
		return true
	}
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// notFound is an error that reads as its message alone and is
// store.ErrNotFound (the API's not_found), which would add ": not found".
type notFound string

func (e notFound) Error() string { return string(e) }
func (e notFound) Unwrap() error { return store.ErrNotFound }
