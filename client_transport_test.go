package layerfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/layerfs/layerfs/api"
)

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	n atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// serveUnix serves h on a unix socket at path until the test ends, or
// until the returned stop is called.
func serveUnix(t *testing.T, path string, h http.Handler) (*countingListener, func()) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: l}
	srv := &http.Server{Handler: h}
	go srv.Serve(cl)
	var once sync.Once
	stop := func() { once.Do(func() { srv.Close() }) }
	t.Cleanup(stop)
	return cl, stop
}

// streamGone is told when a /stream request's client has gone.
var streamGone = make(chan struct{}, 1)

func echoHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		case "/big":
			io.WriteString(w, strings.Repeat("x", 1<<20))
		case "/stream":
			for {
				if _, err := io.WriteString(w, "line\n"); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					streamGone <- struct{}{}
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
		default:
			body, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.Path, body)
		}
	})
}

func get(t *testing.T, c *http.Client, ctx context.Context, path string) (string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://layerfs"+path, strings.NewReader("hi"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestSyncTransport: requests on one goroutine share one connection; a
// connection the daemon closed while idle (a restart) is not used again;
// a cancelled request returns at once and leaves nothing that breaks the
// next; a stream closed early lets go at once; concurrent requests all
// get their answers.
func TestSyncTransport(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "d.sock")
	l, stop := serveUnix(t, sock, echoHandler())
	c := &http.Client{Transport: &syncTransport{socket: sock}}
	ctx := context.Background()
	for i := range 20 {
		got, err := get(t, c, ctx, fmt.Sprintf("/r%d", i))
		if want := fmt.Sprintf("POST /r%d hi", i); err != nil || got != want {
			t.Fatalf("request %d: %q, %v; want %q", i, got, err, want)
		}
	}
	if n := l.n.Load(); n != 1 {
		t.Errorf("20 requests in a row took %d connections; want 1", n)
	}

	// The daemon restarts: its connections close, a new one listens.
	stop()
	serveUnix(t, sock, echoHandler())
	if got, err := get(t, c, ctx, "/after"); err != nil || got != "POST /after hi" {
		t.Fatalf("after a restart: %q, %v", got, err)
	}

	// Cancelled while the daemon works on it.
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := get(t, c, cctx, "/slow"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a request past its deadline: %v; want %v", err, context.DeadlineExceeded)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the cancelled request returned after %v", d)
	}
	if got, err := get(t, c, ctx, "/next"); err != nil || got != "POST /next hi" {
		t.Fatalf("after a cancelled request: %q, %v", got, err)
	}

	// A body closed unread closes its connection; the next request dials.
	req, _ := http.NewRequest(http.MethodGet, "http://layerfs/big", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got, err := get(t, c, ctx, "/again"); err != nil || got != "POST /again hi" {
		t.Fatalf("after an unread body: %q, %v", got, err)
	}

	// A stream closed before its end returns at once, and the daemon
	// learns the client left.
	req, _ = http.NewRequest(http.MethodGet, "http://layerfs/stream", nil)
	if resp, err = c.Do(req); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	resp.Body.Close()
	if d := time.Since(start); d > time.Second {
		t.Errorf("closing a stream before its end took %v", d)
	}
	select {
	case <-streamGone:
	case <-time.After(5 * time.Second):
		t.Error("the server did not see the client leave the stream")
	}

	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 10 {
				path := fmt.Sprintf("/g%d-%d", i, j)
				if got, err := get(t, c, ctx, path); err != nil || got != "POST "+path+" hi" {
					errs <- fmt.Errorf("%s: %q, %v", path, got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// BenchmarkRoundTrip compares a small request's round trip over a unix
// socket through http.Transport and through syncTransport, back to back
// and after a pause (as an agent's requests come, with the cores idle in
// between: where hand-offs between goroutines cost most).
//
//	go test -run '^$' -bench RoundTrip .
func BenchmarkRoundTrip(b *testing.B) {
	sock := filepath.Join(b.TempDir(), "d.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: echoHandler()}
	go srv.Serve(l)
	defer srv.Close()
	transports := map[string]http.RoundTripper{
		"net-http": &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}},
		"sync": &syncTransport{socket: sock},
	}
	for _, name := range []string{"net-http", "sync", "net-http-paused", "sync-paused"} {
		b.Run(name, func(b *testing.B) {
			c := &http.Client{Transport: transports[strings.TrimSuffix(name, "-paused")]}
			paused := strings.HasSuffix(name, "-paused")
			for i := 0; i < b.N; i++ {
				if paused {
					b.StopTimer()
					time.Sleep(time.Millisecond)
					b.StartTimer()
				}
				req, _ := http.NewRequest(http.MethodPost, "http://layerfs/x", strings.NewReader("hi"))
				resp, err := c.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}

// TestAnswerBeforeTheWholeBody: a daemon that refuses a request before
// reading all of its body (one over api.MaxBody: 413) and closes the
// connection is heard: the Client returns its APIError, not the broken
// pipe its write met.
func TestAnswerBeforeTheWholeBody(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "d.sock")
	serveUnix(t, sock, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		io.WriteString(w, `{"code":"bad_request","error":"the body is over 64 MiB"}`)
	}))
	c := Dial(sock)
	_, err := c.Exec(context.Background(), "ws-1", api.ExecRequest{Argv: []string{"cat"}, Stdin: strings.Repeat("x", 32<<20)})
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusRequestEntityTooLarge || ae.Code != api.CodeBadRequest {
		t.Fatalf("exec with a body refused early: %v, want the daemon's 413", err)
	}
	// The next request goes on a new connection.
	if _, err := c.List(context.Background()); !errors.As(err, &ae) || ae.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("list after: %v", err)
	}
}

// TestExecStreamNilCallback: a nil callback drops the output and returns
// the result; it panicked at the first line of output.
func TestExecStreamNilCallback(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "d.sock")
	serveUnix(t, sock, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		io.WriteString(w, `{"stream":"stdout","data":"hi\n"}`+"\n"+`{"result":{"exit_code":3}}`+"\n")
	}))
	res, err := Dial(sock).ExecStream(context.Background(), "ws-1", api.ExecRequest{Argv: []string{"x"}}, nil)
	if err != nil || res.ExitCode != 3 {
		t.Fatalf("ExecStream with no callback: %+v, %v", res, err)
	}
}
