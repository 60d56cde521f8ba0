package main

import (
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
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
