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

// outputGrace is how long exec waits, after its command exits, for output
// from processes the command left running.
const outputGrace = 250 * time.Millisecond

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
	res.ExitCode = exitCode(cmd, waitErr)
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
		// A process the command left in the background may hold its
		// output open; once the command itself exits, wait only briefly
		// for that output, so exec returns.
		cmd.WaitDelay = outputGrace
		return cmd.Start()
	})
	if err != nil {
		return nil, fmt.Errorf("%w: start %s: %v", ErrBadRequest, req.Argv[0], err)
	}
	return cmd, nil
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
