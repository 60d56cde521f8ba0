package sessions

import (
	"bytes"
	"errors"
	"math/rand"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/layerfs/layerfs/api"
)

// TestOutputCutsAtCharacters: text written in pieces of any size, past
// the bound, is kept as text, cut at a character's start.
func TestOutputCutsAtCharacters(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	text := []byte(strings.Repeat("€", api.MaxOutput/3+1000))
	for round := 0; round < 5; round++ {
		o := newOutput(nil)
		w := o.writer("stdout")
		for rest := text; len(rest) > 0; {
			n := min(len(rest), 1+r.Intn(70000))
			if round == 0 && len(text)-len(rest) < api.MaxOutput {
				n = min(n, api.MaxOutput-(len(text)-len(rest))) // the buffer fills to the byte
			}
			w.Write(rest[:n])
			rest = rest[n:]
		}
		w.flush()
		res := o.result()
		if !res.Truncated || res.StdoutBase64 != "" || len(res.Stdout) != api.MaxOutput/3*3 || !utf8.ValidString(res.Stdout) {
			t.Fatalf("round %d: %d bytes as text, %d as base64, truncated %v", round, len(res.Stdout), len(res.StdoutBase64), res.Truncated)
		}
	}
	// Streamed, pieces cut anywhere come out as text, whole.
	var got bytes.Buffer
	o := newOutput(func(ev api.ExecEvent) {
		if ev.DataBase64 != "" || !utf8.ValidString(ev.Data) {
			t.Fatalf("an event not of text: %q %q", ev.Data, ev.DataBase64)
		}
		got.WriteString(ev.Data)
	})
	w := o.writer("stdout")
	small := text[:300_000]
	for rest := small; len(rest) > 0; {
		n := min(len(rest), 1+r.Intn(1000))
		w.Write(rest[:n])
		rest = rest[n:]
	}
	w.flush()
	if !bytes.Equal(got.Bytes(), small) {
		t.Errorf("streamed %d bytes, want %d", got.Len(), len(small))
	}
}

// TestCheckExecEnvNUL: an env entry with a NUL byte is a bad request
// (400); exec.Cmd's start refused it as an internal error (500).
func TestCheckExecEnvNUL(t *testing.T) {
	if err := checkExec(api.ExecRequest{Argv: []string{"true"}, Env: []string{"A=b\x00c"}}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("env with a NUL byte: %v, want %v", err, ErrBadRequest)
	}
	if err := checkExec(api.ExecRequest{Argv: []string{"true"}, Env: []string{"A=b"}}); err != nil {
		t.Fatal(err)
	}
}

// TestOutputReadAfterGrace: what a command wrote before it exited is kept
// even when the goroutine reading its pipe first runs after the grace
// period is over (a busy machine): a read past its deadline fails without
// looking, and lost the whole output of one command in 256 at once.
func TestOutputReadAfterGrace(t *testing.T) {
	p, err := newOutPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer p.w.Close() // a process left in the background holds it open
	if _, err := p.w.WriteString("written before the exit\n"); err != nil {
		t.Fatal(err)
	}
	p.exited()
	time.Sleep(outputGrace + 50*time.Millisecond)
	o := newOutput(nil)
	done := make(chan struct{})
	go func() { p.copy(o.writer("stdout")); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("copy still reading a silent pipe after the grace period")
	}
	if got := o.result().Stdout; got != "written before the exit\n" {
		t.Errorf("stdout %q", got)
	}
}
