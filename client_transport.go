package layerfs

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// syncTransport is the Client's http.RoundTripper: each round trip runs
// on the caller's goroutine, which writes the request and reads the
// response itself. http.Transport writes on a goroutine of its own and
// reads on another, which hands the response over: two more hand-offs a
// request, and on a small machine whose idle cores halt each can cost
// the wake-up of a core (~0.1 ms). Connections are kept for the next
// request; before one is used again it is checked that the daemon has
// not closed it meanwhile (a restart).
type syncTransport struct {
	socket string
	mu     sync.Mutex
	idle   []*syncConn
}

// maxIdle is how many idle connections the Client keeps.
const maxIdle = 4

type syncConn struct {
	conn *net.UnixConn
	br   *bufio.Reader
	bw   *bufio.Writer
}

func (t *syncTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	c, err := t.conn(ctx)
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	// A cancelled context interrupts the round trip, and the body's reads
	// after it, by a deadline in the past.
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (*http.Response, error) {
		stop()
		c.conn.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	err = req.Write(c.bw)
	if err == nil {
		err = c.bw.Flush()
	}
	var resp *http.Response
	if err != nil {
		if resp = earlyAnswer(c, req); resp == nil {
			return fail(err)
		}
	} else if resp, err = http.ReadResponse(c.br, req); err != nil {
		return fail(err)
	}
	resp.Body = &syncBody{ReadCloser: resp.Body, ctx: ctx, t: t, c: c, stop: stop, keep: !resp.Close}
	return resp, nil
}

// earlyAnswer is the daemon's answer to a request whose write failed, or
// nil. One it refused before reading all of its body (a body over
// api.MaxBody: 413) has its answer waiting on the connection it closed,
// and the answer says more than the broken pipe. (The write's error does
// not tell: net/http reports it as one reading the body.)
func earlyAnswer(c *syncConn, req *http.Request) *http.Response {
	if req.Context().Err() != nil {
		return nil
	}
	// A connection the daemon closed reads at once; the deadline bounds
	// the wait on one it did not.
	c.conn.SetReadDeadline(time.Now().Add(time.Second))
	resp, err := http.ReadResponse(c.br, req)
	if err != nil {
		return nil
	}
	resp.Close = true // the connection is not to be used again
	return resp
}

// conn returns an idle connection that is still open, or a new one.
func (t *syncTransport) conn(ctx context.Context) (*syncConn, error) {
	for {
		t.mu.Lock()
		n := len(t.idle)
		if n == 0 {
			t.mu.Unlock()
			break
		}
		c := t.idle[n-1]
		t.idle = t.idle[:n-1]
		t.mu.Unlock()
		if c.open() {
			return c, nil
		}
		c.conn.Close()
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", t.socket)
	if err != nil {
		return nil, err
	}
	uc := nc.(*net.UnixConn)
	return &syncConn{conn: uc, br: bufio.NewReader(uc), bw: bufio.NewWriter(uc)}, nil
}

// open reports whether an idle connection can carry a request: nothing
// is waiting to be read on it, not even its end.
func (c *syncConn) open() bool {
	if c.br.Buffered() > 0 {
		return false
	}
	raw, err := c.conn.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	raw.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		alive = errors.Is(err, unix.EAGAIN)
		return true // never wait
	})
	return alive
}

func (t *syncTransport) put(c *syncConn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.idle) >= maxIdle {
		c.conn.Close()
		return
	}
	t.idle = append(t.idle, c)
}

// CloseIdleConnections closes the idle connections (http.Client's
// CloseIdleConnections calls it).
func (t *syncTransport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, c := range idle {
		c.conn.Close()
	}
}

// syncBody is a response body; read to its end and closed, it gives its
// connection back for the next request.
type syncBody struct {
	io.ReadCloser
	ctx  context.Context
	t    *syncTransport
	c    *syncConn
	stop func() bool
	keep bool // the daemon did not say it closes the connection
	eof  bool
	done bool
}

func (b *syncBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof = true
	} else if err != nil && b.ctx.Err() != nil {
		err = b.ctx.Err() // the deadline in the past was the context's
	}
	return n, err
}

func (b *syncBody) Close() error {
	if b.done {
		return nil
	}
	b.done = true
	if !b.eof || !b.keep {
		// Closed before its end: the connection goes, first, or closing
		// the body would read the rest (a streamed command's output, until
		// it exits), and the daemon learns the client left.
		b.stop()
		b.c.conn.Close()
		b.ReadCloser.Close()
		return nil
	}
	err := b.ReadCloser.Close()
	if b.stop() && err == nil {
		b.t.put(b.c)
	} else {
		b.c.conn.Close()
	}
	return err
}
