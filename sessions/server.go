package sessions

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/publish"
	"github.com/layerfs/layerfs/store"
	"golang.org/x/sys/unix"
)

// Listen opens the daemon's unix socket at path, mode 0600. A stale
// socket (nobody answers) is removed; a live one is an error. One that
// takes connections but does not answer them belongs to a daemon still
// dying (killed a moment ago, its process not yet gone): Listen waits up
// to five seconds for it to go.
func Listen(path string) (net.Listener, error) {
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		c, err := net.DialTimeout("unix", path, 200*time.Millisecond)
		if err != nil {
			break // stale, or gone
		}
		live, pid := answers(c), peerPID(c)
		c.Close()
		if live {
			who := "another daemon"
			if pid > 0 {
				who = fmt.Sprintf("another daemon (pid %d)", pid)
			}
			return nil, fmt.Errorf("listen on %s: %s is serving it: %w", path, who, ErrSocketInUse)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("listen on %s: a process takes connections there but does not answer them", path)
		}
	}
	// Only a socket is stale: anything else there (a mistyped --socket
	// naming a file) is not the daemon's to remove.
	if fi, err := os.Lstat(path); err == nil && fi.Mode().Type() != os.ModeSocket {
		return nil, fmt.Errorf("listen on %s: it is a %s, not a socket; choose another path", path, fileKind(fi.Mode()))
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	l, err := listenUnix(path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// listenUnix listens on a new unix socket at path, mode 0600 from the
// start: the socket file takes the socket's mode, less the umask, at
// bind, so it is set before; a chmod after bind left the file open to
// anyone (0777 under umask 0) for a moment. Listen chmods it after all
// the same, for filesystems that would not take the first.
func listenUnix(path string) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		if cerr := c.Control(func(fd uintptr) { err = unix.Fchmod(int(fd), 0o600) }); cerr != nil {
			return cerr
		}
		return err
	}}
	return lc.Listen(context.Background(), "unix", path)
}

// fileKind names what a file of mode m is, for errors.
func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m.IsRegular():
		return "regular file"
	case m&os.ModeSymlink != 0:
		return "symlink"
	}
	return "special file"
}

// peerPID is the pid of the process that accepted unix connection c, or 0.
func peerPID(c net.Conn) int {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return 0
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0
	}
	pid := 0
	raw.Control(func(fd uintptr) {
		if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
			pid = int(cred.Pid)
		}
	})
	return pid
}

// answers reports whether what took connection c answers a request for
// GET /health within a second, as a daemon does.
func answers(c net.Conn) bool {
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := io.WriteString(c, "GET /health HTTP/1.0\r\nHost: layerfs\r\n\r\n"); err != nil {
		return false
	}
	var buf [5]byte
	n, _ := io.ReadFull(c, buf[:])
	return n == len(buf) && string(buf[:]) == "HTTP/"
}

// Handler serves the socket API (see package api for the routes).
func (d *Daemon) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		h := d.Health()
		if !h.OK {
			// The health, and the error body every failure has.
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			json.NewEncoder(w).Encode(struct {
				api.Health
				api.Error
			}{h, api.Error{Code: api.CodeUnhealthy, Error: h.Problem}})
			return
		}
		reply(w, h)
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		d.WriteMetrics(w)
	})
	mux.HandleFunc("POST /workspaces", d.handleCreate)
	mux.HandleFunc("GET /workspaces", func(w http.ResponseWriter, r *http.Request) { reply(w, d.List()) })
	mux.HandleFunc("GET /workspaces/{id}", func(w http.ResponseWriter, r *http.Request) {
		ws, err := d.Inspect(r.PathValue("id"))
		respond(w, ws, err)
	})
	mux.HandleFunc("POST /workspaces/{id}/exec", d.handleExec)
	mux.HandleFunc("POST /workspaces/{id}/commit", d.handleCommit)
	// Both throw work away: a mistyped parameter or a body they do not
	// take is refused, never read as "no".
	mux.HandleFunc("POST /workspaces/{id}/discard", func(w http.ResponseWriter, r *http.Request) {
		all, err := flagOnly(r, "all")
		if err != nil {
			respond(w, nil, err)
			return
		}
		res, err := d.Discard(r.PathValue("id"), all)
		respond(w, res, err)
	})
	mux.HandleFunc("DELETE /workspaces/{id}", func(w http.ResponseWriter, r *http.Request) {
		discard, err := flagOnly(r, "discard")
		if err != nil {
			respond(w, nil, err)
			return
		}
		err = d.End(r.PathValue("id"), discard)
		respond(w, map[string]bool{"ended": err == nil}, err)
	})
	// Anything else answers a JSON error too, as the API's errors are:
	// 405 for a route's path with another method, 404 for no route.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// An unclean path (//, /./, /../) gets a JSON error like any
		// other, not the mux's redirect with an HTML body.
		if p := r.URL.Path; path.Clean(p) != p && path.Clean(p)+"/" != p {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			json.NewEncoder(w).Encode(api.Error{Code: api.CodeNotFound,
				Error: fmt.Sprintf("no route %s %s: the path is not clean", r.Method, p)})
			return
		}
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		var probe statusProbe
		mux.ServeHTTP(&probe, r) // the mux's own answer, for its status
		w.Header().Set("Content-Type", "application/json")
		if probe.status == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", probe.header.Get("Allow"))
			w.WriteHeader(http.StatusMethodNotAllowed)
			json.NewEncoder(w).Encode(api.Error{Code: api.CodeBadRequest,
				Error: fmt.Sprintf("%s %s: method not allowed (allowed: %s; the routes are in README's socket API section)", r.Method, r.URL.Path, probe.header.Get("Allow"))})
			return
		}
		w.WriteHeader(http.StatusNotFound)
		json.NewEncoder(w).Encode(api.Error{Code: api.CodeNotFound,
			Error: fmt.Sprintf("no route %s %s (the routes are in README's socket API section)", r.Method, r.URL.Path)})
	})
}

// statusProbe keeps a handler's status and headers, and drops its body.
type statusProbe struct {
	header http.Header
	status int
}

func (p *statusProbe) Header() http.Header {
	if p.header == nil {
		p.header = http.Header{}
	}
	return p.header
}
func (p *statusProbe) Write(b []byte) (int, error) { return len(b), nil }
func (p *statusProbe) WriteHeader(status int)      { p.status = status }

// flagOnly reads the one query parameter a request without a body takes,
// a boolean (absent: false), refusing any other parameter, a value that is
// not a boolean, and a body.
func flagOnly(r *http.Request, name string) (bool, error) {
	if r.ContentLength != 0 {
		return false, fmt.Errorf("%w: %s %s takes no body (?%s=1 is its one option)", ErrBadRequest, r.Method, r.URL.Path, name)
	}
	return flagParam(r, name)
}

// flagParam reads a request's query: at most the boolean parameter name,
// once (absent: false).
func flagParam(r *http.Request, name string) (bool, error) {
	q, err := url.ParseQuery(r.URL.RawQuery) // URL.Query drops what it cannot parse
	if err != nil {
		return false, fmt.Errorf("%w: query %q: %v", ErrBadRequest, r.URL.RawQuery, err)
	}
	for k := range q {
		if k != name {
			return false, fmt.Errorf("%w: unknown parameter %q (?%s=1 is the one option)", ErrBadRequest, k, name)
		}
	}
	switch vs := q[name]; {
	case len(vs) == 0:
		return false, nil
	case len(vs) > 1:
		return false, fmt.Errorf("%w: ?%s given %d times: give it once", ErrBadRequest, name, len(vs))
	default:
		on, err := strconv.ParseBool(vs[0])
		if err != nil {
			return false, fmt.Errorf("%w: ?%s=%s: want a boolean (1 or 0)", ErrBadRequest, name, vs[0])
		}
		return on, nil
	}
}

// noParams refuses a query on a request that takes none.
func noParams(r *http.Request) error {
	if r.URL.RawQuery != "" {
		return fmt.Errorf("%w: %s %s takes no parameters (got ?%s)", ErrBadRequest, r.Method, r.URL.Path, r.URL.RawQuery)
	}
	return nil
}

func (d *Daemon) handleCreate(w http.ResponseWriter, r *http.Request) {
	var req api.CreateRequest
	if !decode(w, r, &req) {
		return
	}
	ws, err := d.Create(req)
	if err != nil {
		respond(w, nil, err)
		return
	}
	// A client that went away meanwhile (its context cancelled: it timed
	// out, or was interrupted), or before the reply reached it, never
	// learns the Workspace's id, and nobody would end it: end it here,
	// rather than leave it holding a lease and a place under the cap.
	// (Once the reply is out, the client may well close the connection
	// at once: that is no reason to end it.)
	err = r.Context().Err()
	if err == nil {
		body, _ := json.Marshal(ws)
		body = append(body, '\n')
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusCreated)
		if _, err = w.Write(body); err == nil {
			err = http.NewResponseController(w).Flush()
		}
	}
	if err != nil {
		if err := d.End(ws.ID, true); err != nil {
			d.log.Printf("end %s, created for a client that went away: %v", ws.ID, err)
		}
	}
}

func (d *Daemon) handleCommit(w http.ResponseWriter, r *http.Request) {
	var req api.CommitRequest
	if !decode(w, r, &req) {
		return
	}
	res, err := d.Commit(r.PathValue("id"), req)
	if err == nil && res.Status == api.StatusConflict {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		json.NewEncoder(w).Encode(res)
		return
	}
	respond(w, res, err)
}

func (d *Daemon) handleExec(w http.ResponseWriter, r *http.Request) {
	var req api.ExecRequest
	if !decode(w, r, &req) {
		return
	}
	stream, err := flagParam(r, "stream")
	if err != nil {
		respond(w, nil, err)
		return
	}
	if !stream {
		res, err := d.Exec(r.Context(), r.PathValue("id"), req, nil)
		respond(w, res, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	send := func(ev api.ExecEvent) {
		enc.Encode(ev)
		if flusher != nil {
			flusher.Flush()
		}
	}
	res, err := d.Exec(r.Context(), r.PathValue("id"), req, send)
	if err != nil {
		respond(w, nil, err)
		return
	}
	send(api.ExecEvent{Result: &res})
}

// decode reads a JSON body, one object and nothing after it; an empty
// body is the zero request. Of the requests with a body, only exec takes
// a parameter (stream), which handleExec reads.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	r.Body = http.MaxBytesReader(w, r.Body, api.MaxBody)
	if err := decodeBody(r, v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			err = fmt.Errorf("%w: the body is over %d MiB (exec's stdin travels in it, whole: put large input in the Workspace instead)", ErrTooLarge, api.MaxBody>>20)
		}
		respond(w, nil, err)
		return false
	}
	return true
}

func decodeBody(r *http.Request, v any) error {
	if !strings.HasSuffix(r.Pattern, "/exec") {
		if err := noParams(r); err != nil {
			return err
		}
	}
	if r.ContentLength == 0 {
		return nil
	}
	br := bufio.NewReader(r.Body)
	for {
		c, err := br.ReadByte()
		if err == io.EOF {
			return nil // only white space: as empty
		}
		if err != nil {
			return fmt.Errorf("%w: body: %w", ErrBadRequest, err)
		}
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			continue
		}
		if c != '{' {
			return fmt.Errorf("%w: body: want a JSON object", ErrBadRequest)
		}
		br.UnreadByte()
		break
	}
	dec := json.NewDecoder(br)
	dec.DisallowUnknownFields() // a misspelt field is a mistake, not a default
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: body: %w", ErrBadRequest, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: body: something after the JSON object", ErrBadRequest)
	}
	return nil
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// respond writes v, or err as an api.Error with the status it maps to.
func respond(w http.ResponseWriter, v any, err error) {
	if err == nil {
		reply(w, v)
		return
	}
	status, code := errorStatus(err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(api.Error{Code: code, Error: err.Error()})
}

func errorStatus(err error) (int, string) {
	switch {
	case errors.Is(err, store.ErrMissingObject): // a damaged Store, not a missing name
		return http.StatusInternalServerError, api.CodeInternal
	case errors.Is(err, ErrNotFound), errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound, api.CodeNotFound
	case errors.Is(err, ErrNoCommand):
		return http.StatusBadRequest, api.CodeNoCommand
	case errors.Is(err, ErrCannotRun):
		return http.StatusBadRequest, api.CodeCannotRun
	case errors.Is(err, ErrTooLarge):
		return http.StatusRequestEntityTooLarge, api.CodeBadRequest
	case errors.Is(err, ErrCap):
		return http.StatusTooManyRequests, api.CodeCap
	case errors.Is(err, ErrDirty):
		return http.StatusConflict, api.CodeDirty
	case errors.Is(err, publish.ErrMarkers):
		return http.StatusConflict, api.CodeMarkers
	case errors.Is(err, ErrUnsettled):
		return http.StatusConflict, api.CodeUnsettled
	case errors.Is(err, ErrRunning):
		return http.StatusConflict, api.CodeRunning
	case errors.Is(err, publish.ErrChanged):
		return http.StatusConflict, api.CodeChanged
	case errors.Is(err, ErrBadRequest), errors.Is(err, store.ErrBadName), errors.Is(err, store.ErrBadPath):
		return http.StatusBadRequest, api.CodeBadRequest
	case errors.Is(err, ErrClosed):
		return http.StatusServiceUnavailable, api.CodeInternal
	}
	return http.StatusInternalServerError, api.CodeInternal
}

// Serve answers requests on l until ctx is done, then shuts the server
// down, waiting a little for requests under way.
func (d *Daemon) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{Handler: d.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		done := make(chan struct{})
		go func() { srv.Shutdown(shut); close(done) }()
		// A command holds its request, and so the shutdown, for as long
		// as it runs: the daemon is going, and its commands with it.
		d.reaper.killAll()
		<-done
		return nil
	}
}
