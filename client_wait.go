package layerfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// How long a Client waits for a daemon that does not answer. A daemon can
// accept connections and never answer them: one stuck dying on its own
// FUSE mount (see sessions.RescueWedged) keeps its socket, whose backlog
// takes every connection. Health and List answer at once from a daemon
// that works, so they are bounded. Exec, commit and the other calls may
// legitimately take hours; while they wait, the Client asks the daemon's
// health on a connection of its own now and then, and gives up only when
// that gets no answer either.
const (
	// DefaultQuickTimeout bounds Health and List, and each health probe.
	DefaultQuickTimeout = 30 * time.Second
	// DefaultProbeEvery is how often a call that waits asks the daemon's
	// health.
	DefaultProbeEvery = 30 * time.Second
)

// ErrNoAnswer: the daemon took the request but did not answer it — nor,
// for a call that may legitimately run long, a health probe beside it. A
// daemon in that state is wedged or badly overloaded; its log, and
// restarting it (which frees a wedged one's state directory), are what is
// left.
var ErrNoAnswer = errors.New("the daemon does not answer")

// noAnswerError says which daemon did not answer what, within how long.
type noAnswerError struct {
	socket string
	call   string // "GET /workspaces"
	after  time.Duration
	probe  bool // a health probe beside call got no answer
}

func (e *noAnswerError) Error() string {
	if e.probe {
		return fmt.Sprintf("daemon at %s: no answer to GET /health within %s while waiting for %s, which it may still carry out: %v (wedged? see its log, or restart it)",
			e.socket, e.after, e.call, ErrNoAnswer)
	}
	return fmt.Sprintf("daemon at %s: no answer to %s within %s: %v (wedged or overloaded? see its log, or restart it)",
		e.socket, e.call, e.after, ErrNoAnswer)
}

func (e *noAnswerError) Unwrap() []error { return []error{ErrNoAnswer, context.DeadlineExceeded} }

// quick returns the context a call that should answer at once (Health,
// List) runs under: ctx, bounded by QuickTimeout unless ctx has a
// deadline of its own.
func (c *Client) quick(ctx context.Context, call string) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok || c.QuickTimeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, c.QuickTimeout, &noAnswerError{socket: c.socket, call: call, after: c.QuickTimeout})
}

// watch returns the context a call that may run long runs under: ctx,
// cancelled with a noAnswerError if a health probe, every ProbeEvery
// while the call waits, gets no answer within QuickTimeout. done stops
// the probes.
func (c *Client) watch(ctx context.Context, call string) (_ context.Context, done func()) {
	if c.ProbeEvery <= 0 {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	var mu sync.Mutex
	stopped := false
	var t *time.Timer
	mu.Lock()
	t = time.AfterFunc(c.ProbeEvery, func() {
		if !c.answers(ctx) {
			cancel(&noAnswerError{socket: c.socket, call: call, after: c.probeWait(), probe: true})
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			t.Reset(c.ProbeEvery)
		}
	})
	mu.Unlock()
	return ctx, func() {
		mu.Lock()
		stopped = true
		t.Stop()
		mu.Unlock()
		cancel(nil)
	}
}

// probeWait is how long a health probe waits for its answer.
func (c *Client) probeWait() time.Duration {
	if c.QuickTimeout > 0 {
		return c.QuickTimeout
	}
	return DefaultQuickTimeout
}

// answers asks the daemon's health and reports whether any answer came,
// healthy or not, within probeWait. A probe that fails otherwise (the
// socket gone: the daemon stopped, or restarts) or that the call's end
// cut short counts as an answer: the call's own connection tells those.
func (c *Client) answers(ctx context.Context) bool {
	pctx, cancel := context.WithTimeout(ctx, c.probeWait())
	defer cancel()
	req, err := http.NewRequestWithContext(pctx, http.MethodGet, "http://layerfs/health", nil)
	if err != nil {
		return true
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	return true
}

// noAnswer is err, or the noAnswerError that cut the call short.
func noAnswer(ctx context.Context, err error) error {
	var na *noAnswerError
	if err != nil && errors.As(context.Cause(ctx), &na) {
		return na
	}
	return err
}
