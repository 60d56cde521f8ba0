package main

import (
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/layerfs/layerfs/api"
)

// TestWSExecSubMillisecondTimeout: ws exec --timeout shorter than a
// millisecond asks for one millisecond, not for none (timeout_ms 0): a
// command told to stop almost at once ran for ever.
func TestWSExecSubMillisecondTimeout(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "d.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan api.ExecRequest, 1)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req api.ExecRequest
		json.NewDecoder(r.Body).Decode(&req)
		got <- req
		json.NewEncoder(w).Encode(api.ExecEvent{Result: &api.ExecResult{}})
	})}
	go srv.Serve(l)
	defer srv.Close()
	if code, _, errs := runCLI(t, "ws", "exec", "--socket", sock, "--timeout", "500us", "ws-1", "--", "sleep", "9"); code != 0 {
		t.Fatalf("ws exec: exit %d: %s", code, errs)
	}
	if req := <-got; req.TimeoutMS != 1 {
		t.Fatalf("--timeout 500us sent timeout_ms %d, want 1", req.TimeoutMS)
	}
}

// TestWSNamesQuoted: ws commit and ws inspect print a name holding a
// newline quoted, as log and diff do, not as two lines.
func TestWSNamesQuoted(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "d.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ws := api.Workspace{ID: "ws-1", Branch: "main", Pending: []string{"p1\nq1"}, Unsettled: []string{"u1\nv1"}}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			json.NewEncoder(w).Encode(ws)
			return
		}
		json.NewEncoder(w).Encode(api.CommitResult{Status: api.StatusCommitted, Workspace: ws,
			Kept:    []api.UncommittedPath{{Path: "n1\nl1", Why: api.UncommittedSpecial}},
			Dropped: []api.UncommittedPath{{Path: "d1\ne1", Why: api.UncommittedIgnored}}, Merged: []string{"m1\nn1"}})
	})}
	go srv.Serve(l)
	defer srv.Close()
	for _, args := range [][]string{{"ws", "commit", "--socket", sock, "ws-1"}, {"ws", "inspect", "--socket", sock, "ws-1"}} {
		code, out, errs := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		for _, name := range []string{"p1\nq1", "u1\nv1", "n1\nl1", "d1\ne1", "m1\nn1"} {
			if strings.Contains(out, name) {
				t.Errorf("%v prints %q unquoted:\n%s", args[:2], name, out)
			}
		}
	}
}
