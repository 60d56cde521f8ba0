package layerfs

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/layerfs/layerfs/api"
)

// wedgedSocket listens on a unix socket and never accepts: the kernel's
// backlog takes the connections, and nothing answers, as for a daemon
// stuck dying with its socket still open.
func wedgedSocket(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "d.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return sock
}

// within runs call and fails the test if it has not returned in 20 s.
func within(t *testing.T, what string, call func() error) error {
	t.Helper()
	errs := make(chan error, 1)
	go func() { errs <- call() }()
	select {
	case err := <-errs:
		return err
	case <-time.After(20 * time.Second):
		t.Fatalf("%s still waits after 20 s", what)
		return nil
	}
}

// TestQuickCallsGiveUpOnAWedgedDaemon: Health and List of a daemon that
// takes the connection and never answers give up after QuickTimeout, with
// an error naming the socket and matching ErrNoAnswer; they waited
// forever.
func TestQuickCallsGiveUpOnAWedgedDaemon(t *testing.T) {
	sock := wedgedSocket(t)
	c := Dial(sock)
	c.QuickTimeout = 50 * time.Millisecond
	for name, call := range map[string]func() error{
		"GET /health":     func() error { _, err := c.Health(context.Background()); return err },
		"GET /workspaces": func() error { _, err := c.List(context.Background()); return err },
	} {
		err := within(t, name, call)
		if !errors.Is(err, ErrNoAnswer) || !errors.Is(err, context.DeadlineExceeded) ||
			!strings.Contains(err.Error(), sock) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s of a wedged daemon: %v, want ErrNoAnswer naming the socket and the call", name, err)
		}
	}
	// A deadline of the caller's own decides instead.
	c.QuickTimeout = time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := within(t, "health with a deadline", func() error { _, err := c.Health(ctx); return err })
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrNoAnswer) {
		t.Errorf("health with a deadline of its own: %v", err)
	}
}

// TestLongCallsGiveUpWhenHealthDoesNotAnswer: exec, streamed exec and
// commit of a daemon that never answers fail once a health probe beside
// them gets no answer either, naming the socket; they waited forever.
func TestLongCallsGiveUpWhenHealthDoesNotAnswer(t *testing.T) {
	sock := wedgedSocket(t)
	c := Dial(sock)
	c.QuickTimeout, c.ProbeEvery = 50*time.Millisecond, 20*time.Millisecond
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"exec": func() error { _, err := c.Exec(ctx, "ws-1", api.ExecRequest{Argv: []string{"true"}}); return err },
		"stream": func() error {
			_, err := c.ExecStream(ctx, "ws-1", api.ExecRequest{Argv: []string{"true"}}, nil)
			return err
		},
		"commit": func() error { _, err := c.Commit(ctx, "ws-1", api.CommitRequest{}); return err },
	} {
		err := within(t, name, call)
		if !errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), sock) || !strings.Contains(err.Error(), "GET /health") {
			t.Errorf("%s of a wedged daemon: %v, want ErrNoAnswer naming the socket and the probe", name, err)
		}
	}
}

// TestLongCallsWaitForABusyDaemon: a command that runs far longer than
// the probes' interval, on a daemon that answers its health, is waited
// for, whole or streamed: a busy daemon is not a wedged one.
func TestLongCallsWaitForABusyDaemon(t *testing.T) {
	var probes atomic.Int64
	sock := filepath.Join(t.TempDir(), "d.sock")
	serveUnix(t, sock, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			probes.Add(1)
			io.WriteString(w, `{"ok":true}`)
			return
		}
		for probes.Load() < 3 { // long enough for three probes
			time.Sleep(5 * time.Millisecond)
		}
		if r.URL.Query().Get("stream") == "1" {
			io.WriteString(w, `{"result":{"exit_code":7}}`+"\n")
			return
		}
		io.WriteString(w, `{"exit_code":7}`)
	}))
	c := Dial(sock)
	c.QuickTimeout, c.ProbeEvery = time.Second, 10*time.Millisecond
	ctx := context.Background()
	var res api.ExecResult
	err := within(t, "exec", func() (err error) { res, err = c.Exec(ctx, "ws-1", api.ExecRequest{Argv: []string{"sleep"}}); return })
	if err != nil || res.ExitCode != 7 {
		t.Errorf("exec on a busy daemon: %+v, %v", res, err)
	}
	probes.Store(0)
	err = within(t, "stream", func() (err error) {
		res, err = c.ExecStream(ctx, "ws-1", api.ExecRequest{Argv: []string{"sleep"}}, nil)
		return
	})
	if err != nil || res.ExitCode != 7 {
		t.Errorf("streamed exec on a busy daemon: %+v, %v", res, err)
	}
}
