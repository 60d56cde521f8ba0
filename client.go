package layerfs

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"syscall"
	"time"

	"github.com/layerfs/layerfs/api"
)

// Client talks to a LayerFS daemon over its unix socket: Workspaces are the
// one thing the SDK cannot do in-process.
//
// A call's context bounds it. Besides, a Client does not wait forever on
// a daemon that took its request but does not answer (a wedged one): see
// QuickTimeout and ProbeEvery, and ErrNoAnswer.
type Client struct {
	// QuickTimeout bounds Health and List, which a working daemon
	// answers at once, when their context has no deadline of its own,
	// and each health probe (ProbeEvery); DefaultQuickTimeout unless set.
	// 0 or less: Health and List are not bounded.
	QuickTimeout time.Duration
	// ProbeEvery is how often a call that may legitimately run long —
	// create, inspect, exec, commit, discard, end — asks the daemon's
	// health while it waits, on a connection of its own; a probe that
	// gets no answer within QuickTimeout fails the call with ErrNoAnswer.
	// DefaultProbeEvery unless set; 0 or less: no probes, the call waits
	// as long as its context lets it. Set both before the first call.
	ProbeEvery time.Duration

	socket string
	http   *http.Client
}

// Dial returns a Client for the daemon listening on socket. It connects
// lazily, at the first request, and keeps its connections for the next.
func Dial(socket string) *Client {
	return &Client{socket: socket, http: &http.Client{Transport: &syncTransport{socket: socket}},
		QuickTimeout: DefaultQuickTimeout, ProbeEvery: DefaultProbeEvery}
}

// do makes a request whose answer may take long, watching the daemon
// meanwhile (watch).
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	ctx, done := c.watch(ctx, method+" "+path)
	defer done()
	return noAnswer(ctx, c.request(ctx, method, path, in, out))
}

// request makes one request and decodes its answer into out.
func (c *Client) request(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://layerfs"+path, body)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return c.requestError(err)
	}
	defer func() {
		// Read to the end, so the connection is kept for the next request:
		// closing a body unread closes the connection with it. (A reply
		// longer than that is not worth reading for it.)
		io.CopyN(io.Discard, resp.Body, 64<<10)
		resp.Body.Close()
	}()
	if resp.StatusCode >= 400 && resp.StatusCode != http.StatusConflict || (resp.StatusCode == http.StatusConflict && out == nil) {
		return decodeError(resp)
	}
	if resp.StatusCode == http.StatusConflict {
		// A commit conflict is a result; a dirty end is an error.
		data, _ := io.ReadAll(resp.Body)
		var e api.Error
		if json.Unmarshal(data, &e) == nil && e.Code != "" {
			return &APIError{Status: resp.StatusCode, Code: e.Code, Msg: e.Error}
		}
		return json.Unmarshal(data, out)
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// requestError describes a request that reached no daemon: no socket
// there, or nobody listening on it, says so plainly.
func (c *Client) requestError(err error) error {
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("no daemon listening on %s (start one with layerfs daemon, or name its socket): %w", c.socket, err)
	}
	return fmt.Errorf("daemon at %s: %w", c.socket, err)
}

func decodeError(resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return errorOf(resp, data)
}

// errorOf is the APIError a failed request's body data describes.
func errorOf(resp *http.Response, data []byte) error {
	var e api.Error
	if err := json.Unmarshal(data, &e); err != nil || e.Code == "" {
		e.Code, e.Error = api.CodeInternal, resp.Status
	}
	return &APIError{Status: resp.StatusCode, Code: e.Code, Msg: e.Error}
}

// Health asks whether the daemon is up.
// An unhealthy daemon answers 503 with its Health (OK false, Problem
// set) and an APIError (CodeUnhealthy) naming the problem.
//
// Without a deadline in ctx it waits at most QuickTimeout, then returns an
// error matching ErrNoAnswer.
func (c *Client) Health(ctx context.Context) (api.Health, error) {
	ctx, cancel := c.quick(ctx, "GET /health")
	defer cancel()
	h, err := c.health(ctx)
	return h, noAnswer(ctx, err)
}

func (c *Client) health(ctx context.Context) (api.Health, error) {
	var h api.Health
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://layerfs/health", nil)
	if err != nil {
		return h, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return h, c.requestError(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return h, c.requestError(err)
	}
	err = json.Unmarshal(data, &h) // an unhealthy daemon's 503 holds its health too
	if resp.StatusCode >= 400 {
		return h, errorOf(resp, data)
	}
	if err != nil {
		return h, fmt.Errorf("daemon at %s: health: %w", c.socket, err)
	}
	return h, nil
}

// Create makes a Workspace.
func (c *Client) Create(ctx context.Context, req api.CreateRequest) (api.Workspace, error) {
	var w api.Workspace
	return w, c.do(ctx, http.MethodPost, "/workspaces", req, &w)
}

// List describes every Workspace. Without a deadline in ctx it waits at
// most QuickTimeout, then returns an error matching ErrNoAnswer.
func (c *Client) List(ctx context.Context) ([]api.Workspace, error) {
	ctx, cancel := c.quick(ctx, "GET /workspaces")
	defer cancel()
	var ws []api.Workspace
	return ws, noAnswer(ctx, c.request(ctx, http.MethodGet, "/workspaces", nil, &ws))
}

// Inspect describes one Workspace with its uncommitted changed paths.
func (c *Client) Inspect(ctx context.Context, id string) (api.Workspace, error) {
	var w api.Workspace
	return w, c.do(ctx, http.MethodGet, "/workspaces/"+url.PathEscape(id), nil, &w)
}

// Exec runs a command in a Workspace and returns its result.
func (c *Client) Exec(ctx context.Context, id string, req api.ExecRequest) (api.ExecResult, error) {
	var r api.ExecResult
	return r, c.do(ctx, http.MethodPost, "/workspaces/"+url.PathEscape(id)+"/exec", req, &r)
}

// ExecStream runs a command and calls fn with its output as it comes; a
// nil fn drops the output (the result still carries the exit code).
func (c *Client) ExecStream(ctx context.Context, id string, req api.ExecRequest, fn func(api.ExecEvent)) (api.ExecResult, error) {
	if fn == nil {
		fn = func(api.ExecEvent) {}
	}
	path := "/workspaces/" + url.PathEscape(id) + "/exec"
	ctx, done := c.watch(ctx, "POST "+path)
	defer done()
	res, err := c.execStream(ctx, path, req, fn)
	return res, noAnswer(ctx, err)
}

func (c *Client) execStream(ctx context.Context, path string, req api.ExecRequest, fn func(api.ExecEvent)) (api.ExecResult, error) {
	data, err := json.Marshal(req)
	if err != nil {
		return api.ExecResult{}, err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://layerfs"+path+"?stream=1", bytes.NewReader(data))
	if err != nil {
		return api.ExecResult{}, err
	}
	resp, err := c.http.Do(hreq)
	if err != nil {
		return api.ExecResult{}, c.requestError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		return api.ExecResult{}, decodeError(resp)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var ev api.ExecEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return api.ExecResult{}, err
		}
		if ev.Result != nil {
			return *ev.Result, nil
		}
		fn(ev)
	}
	if err := sc.Err(); err != nil {
		return api.ExecResult{}, err
	}
	return api.ExecResult{}, errors.New("daemon: exec stream ended without a result")
}

// Commit captures and publishes a Workspace's changes. A conflict is a
// result (Status "conflict"), not an error.
func (c *Client) Commit(ctx context.Context, id string, req api.CommitRequest) (api.CommitResult, error) {
	var r api.CommitResult
	return r, c.do(ctx, http.MethodPost, "/workspaces/"+url.PathEscape(id)+"/commit", req, &r)
}

// Discard drops a Workspace's uncommitted changes. It keeps, and lists,
// what a commit would leave out — paths /.layerfsignore matches, FIFOs,
// sockets, devices — unless all is set.
func (c *Client) Discard(ctx context.Context, id string, all bool) (api.DiscardResult, error) {
	q := ""
	if all {
		q = "?all=1"
	}
	var r api.DiscardResult
	return r, c.do(ctx, http.MethodPost, "/workspaces/"+url.PathEscape(id)+"/discard"+q, nil, &r)
}

// End ends a Workspace; with uncommitted changes it is refused unless
// discard is set.
func (c *Client) End(ctx context.Context, id string, discard bool) error {
	q := ""
	if discard {
		q = "?discard=1"
	}
	return c.do(ctx, http.MethodDelete, "/workspaces/"+url.PathEscape(id)+q, nil, nil)
}
