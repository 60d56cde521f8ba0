package sessions

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/layerfs/layerfs/api"
)

// maxOutput bounds the stdout and stderr an exec keeps for its reply; the
// streaming form has no bound.
const maxOutput = 16 << 20

// Exec runs a command in a Workspace's namespace. When stream is set it
// receives output as it comes, and the result carries none.
func (d *Daemon) Exec(ctx context.Context, id string, req api.ExecRequest, stream func(api.ExecEvent)) (api.ExecResult, error) {
	w, err := d.get(id)
	if err != nil {
		return api.ExecResult{}, err
	}
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return api.ExecResult{}, fmt.Errorf("%w: exec needs argv", ErrBadRequest)
	}
	d.metrics.execs.Add(1)
	return w.exec(ctx, req, stream)
}

func (w *workspace) exec(ctx context.Context, req api.ExecRequest, stream func(api.ExecEvent)) (api.ExecResult, error) {
	if req.TimeoutMS > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutMS)*time.Millisecond)
		defer cancel()
	}
	out := newOutput(stream)
	start := time.Now()
	cmd, err := w.start(req, out)
	if err != nil {
		return api.ExecResult{}, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var waitErr error
	timedOut := false
	select {
	case waitErr = <-done:
	case <-ctx.Done():
		timedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the whole process group
		waitErr = <-done
	}
	res := out.result()
	res.DurationMS = float64(time.Since(start).Microseconds()) / 1000
	res.TimedOut = timedOut
	res.ExitCode = exitCode(waitErr)
	return res, nil
}

// start starts the command from inside the Workspace's namespace, under
// the read lock, so a commit cannot swap the view while it starts.
func (w *workspace) start(req api.ExecRequest, out *output) (*exec.Cmd, error) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.holder == nil {
		return nil, fmt.Errorf("workspace %s: %w", w.rec.ID, ErrNotFound)
	}
	dir := w.rec.Path
	if req.Cwd != "" {
		dir = req.Cwd
		if !path.IsAbs(dir) {
			dir = path.Join(w.rec.Path, dir)
		}
	}
	w.d.reaper.track(w.holder.ns)
	var cmd *exec.Cmd
	err := w.holder.inNamespace(req.IsolateNetwork, func() error {
		// Look the program up here, so a path inside the Workspace works.
		cmd = exec.Command(req.Argv[0], req.Argv[1:]...)
		cmd.Dir = dir
		cmd.Env = req.Env
		cmd.Stdin = strings.NewReader(req.Stdin)
		cmd.Stdout, cmd.Stderr = out.writer("stdout"), out.writer("stderr")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return cmd.Start()
	})
	if err != nil {
		return nil, fmt.Errorf("%w: start %s: %v", ErrBadRequest, req.Argv[0], err)
	}
	return cmd, nil
}

func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return -1
}

// output collects a command's stdout and stderr, or streams them.
type output struct {
	mu             sync.Mutex
	stream         func(api.ExecEvent)
	stdout, stderr bytes.Buffer
}

func newOutput(stream func(api.ExecEvent)) *output { return &output{stream: stream} }

func (o *output) writer(name string) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.stream != nil {
			o.stream(api.ExecEvent{Stream: name, Data: string(p)})
			return len(p), nil
		}
		buf := &o.stdout
		if name == "stderr" {
			buf = &o.stderr
		}
		if room := maxOutput - buf.Len(); room > 0 {
			buf.Write(p[:min(len(p), room)])
		}
		return len(p), nil
	})
}

func (o *output) result() api.ExecResult {
	o.mu.Lock()
	defer o.mu.Unlock()
	return api.ExecResult{Stdout: o.stdout.String(), Stderr: o.stderr.String()}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
