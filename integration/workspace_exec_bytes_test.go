package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"math/rand"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/sessions"
)

// TestExecBytesExact: a command's stdin and output pass through exactly,
// whatever the bytes. JSON strings hold only text, so bytes that are not
// UTF-8 travel as base64, and streamed text is never cut inside a
// character: before, random bytes came back half again as long, and
// streamed "€"s came back with U+FFFD where a read had split one.
func TestExecBytesExact(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{})
	w := d.create(t, "main")
	ctx := context.Background()
	binary := make([]byte, 300_000)
	rand.New(rand.NewSource(1)).Read(binary)
	text := []byte(strings.Repeat("€uro ", 100_000)) // 3-byte characters across every pipe read

	for _, c := range []struct {
		name  string
		input []byte
		req   api.ExecRequest
		text  bool // the output should come as text
	}{
		{"binary", binary, api.ExecRequest{StdinBase64: base64.StdEncoding.EncodeToString(binary)}, false},
		{"text", text, api.ExecRequest{Stdin: string(text)}, true},
	} {
		c.req.Argv = []string{"cat"}
		res, err := d.Exec(ctx, w.ID, c.req, nil)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: exec: %+v %v", c.name, res.ExitCode, err)
		}
		if got := res.StdoutBytes(); !bytes.Equal(got, c.input) {
			t.Errorf("%s: stdout is %d bytes, want the %d sent", c.name, len(got), len(c.input))
		}
		if (res.Stdout != "") != c.text || (res.StdoutBase64 != "") == c.text || res.Truncated {
			t.Errorf("%s: stdout %d bytes as text, %d as base64, truncated %v", c.name, len(res.Stdout), len(res.StdoutBase64), res.Truncated)
		}

		var streamed bytes.Buffer
		var b64Events, cutEvents int
		res, err = d.Exec(ctx, w.ID, c.req, func(ev api.ExecEvent) {
			streamed.Write(ev.Bytes())
			if ev.DataBase64 != "" {
				b64Events++
			}
			if !utf8.ValidString(ev.Data) {
				cutEvents++ // JSON would make U+FFFD of it
			}
		})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: streamed exec: %+v %v", c.name, res.ExitCode, err)
		}
		if !bytes.Equal(streamed.Bytes(), c.input) {
			t.Errorf("%s: streamed %d bytes, want the %d sent", c.name, streamed.Len(), len(c.input))
		}
		if c.text && b64Events > 0 {
			t.Errorf("%s: %d events of text came as base64", c.name, b64Events)
		}
		if cutEvents > 0 {
			t.Errorf("%s: %d events' data is not UTF-8", c.name, cutEvents)
		}
	}

	// An output over the bound is cut, and says so; text cut there stays
	// text (16 MiB is not a whole number of 3-byte characters).
	res, err := d.Exec(ctx, w.ID, api.ExecRequest{Argv: []string{"head", "-c", "17000000", "/dev/zero"}}, nil)
	if err != nil || len(res.StdoutBytes()) != api.MaxOutput || !res.Truncated {
		t.Errorf("17 MB of output: kept %d bytes, truncated %v, %v; want %d, true", len(res.StdoutBytes()), res.Truncated, err, api.MaxOutput)
	}
	res, err = d.Exec(ctx, w.ID, api.ExecRequest{Argv: []string{"sh", "-c", `yes € | tr -d '\n' | head -c 18000000`}}, nil)
	if want := api.MaxOutput / 3 * 3; err != nil || len(res.Stdout) != want || res.StdoutBase64 != "" || !res.Truncated {
		b := res.StdoutBytes()
		bad := 0
		for bad < len(b) {
			r, size := utf8.DecodeRune(b[bad:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			bad += size
		}
		t.Errorf("18 MB of text: %d bytes as text, %d as base64 (%d bytes; not UTF-8 at %d: % x), truncated %v, %v; want %d as text", len(res.Stdout), len(res.StdoutBase64), len(b), bad, b[max(bad-4, 0):min(bad+8, len(b))], res.Truncated, err, want)
	}
	_, err = d.Exec(ctx, w.ID, api.ExecRequest{Argv: []string{"cat"}, Stdin: "a", StdinBase64: "YQ=="}, nil)
	if !errors.Is(err, sessions.ErrBadRequest) {
		t.Errorf("stdin and stdin_base64 both: %v", err)
	}
	_, err = d.Exec(ctx, w.ID, api.ExecRequest{Argv: []string{"cat"}, StdinBase64: "not base64!"}, nil)
	if !errors.Is(err, sessions.ErrBadRequest) || !strings.Contains(err.Error(), "stdin_base64") {
		t.Errorf("stdin_base64 that does not decode: %v", err)
	}
}
