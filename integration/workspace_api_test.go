package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/layerfs/layerfs"
	"github.com/layerfs/layerfs/api"
)

// curlUnix makes one request to the daemon with curl --unix-socket and
// returns the HTTP status and body.
func curlUnix(t *testing.T, socket, method, path, body string) (int, string) {
	t.Helper()
	args := []string{"-sS", "--unix-socket", socket, "-X", method, "-w", "\n%{http_code}", "http://layerfs" + path}
	if body != "" {
		args = append(args, "-H", "Content-Type: application/json", "-d", body)
	}
	out, err := exec.Command("curl", args...).Output()
	if err != nil {
		t.Fatalf("curl %s %s: %v", method, path, err)
	}
	text := strings.TrimSuffix(string(out), "\n")
	i := strings.LastIndexByte(text, '\n')
	status, err := strconv.Atoi(text[i+1:])
	if err != nil {
		t.Fatalf("curl %s %s: no status in %q", method, path, text)
	}
	return status, text[:i+1]
}

// decodeJSON decodes a body into v, failing the test on bad JSON.
func decodeJSON(t *testing.T, body string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
}

// TestSocketAPIWithCurl drives a daemon process with nothing but curl
// --unix-socket, as README shows: health, create, exec (whole and
// streamed), inspect, list, commit, a conflicting commit (409), errors
// (404, 400, dirty end 409), metrics, end. The socket is mode 0600.
func TestSocketAPIWithCurl(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is not installed; this bar needs it")
	}
	src := t.TempDir()
	writeTree(t, src, map[string]string{"a.txt": "a\n"})
	p := startDaemonProc(t, initStore(t, src), filepath.Join(t.TempDir(), "state"))
	sock := p.socket
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode: %v %v, want 0600", fi.Mode(), err)
	}
	call := func(method, path, body string, wantStatus int) string {
		t.Helper()
		status, out := curlUnix(t, sock, method, path, body)
		if status != wantStatus {
			t.Fatalf("%s %s: %d %s, want %d", method, path, status, out, wantStatus)
		}
		return out
	}

	var health api.Health
	decodeJSON(t, call("GET", "/health", "", 200), &health)
	if !health.OK || health.Workspaces != 0 {
		t.Errorf("health: %+v", health)
	}
	var a, b api.Workspace
	// The daemon makes the path, in the namespace but on the root
	// filesystem it shares with the host: a temporary one leaves nothing.
	repo := filepath.Join(t.TempDir(), "repo")
	decodeJSON(t, call("POST", "/workspaces", `{"branch":"main","path":"`+repo+`"}`, 201), &a)
	decodeJSON(t, call("POST", "/workspaces", "", 201), &b)
	if a.Path != repo || b.Path != api.DefaultPath || a.ID == b.ID {
		t.Fatalf("created %+v and %+v", a, b)
	}

	var res api.ExecResult
	out := call("POST", "/workspaces/"+a.ID+"/exec", `{"argv":["sh","-c","echo curl > a.txt; pwd; echo err >&2; exit 3"]}`, 200)
	if !strings.Contains(out, `"timed_out":false`) {
		t.Errorf("exec result without timed_out: %s", out)
	}
	decodeJSON(t, out, &res)
	if res.ExitCode != 3 || res.Stdout != repo+"\n" || res.Stderr != "err\n" {
		t.Errorf("exec: %+v", res)
	}
	stream := call("POST", "/workspaces/"+a.ID+"/exec?stream=1", `{"argv":["sh","-c","cat a.txt; echo e >&2"],"cwd":"`+repo+`"}`, 200)
	var events []api.ExecEvent
	for _, line := range strings.Split(strings.TrimSpace(stream), "\n") {
		var ev api.ExecEvent
		decodeJSON(t, line, &ev)
		events = append(events, ev)
	}
	if n := len(events); n < 3 || events[n-1].Result == nil || events[n-1].Result.ExitCode != 0 || !strings.Contains(stream, `"data":"curl\n"`) {
		t.Errorf("streamed exec:\n%s", stream)
	}
	var in api.Workspace
	decodeJSON(t, call("GET", "/workspaces/"+a.ID, "", 200), &in)
	if strings.Join(in.Pending, " ") != "a.txt" {
		t.Errorf("inspect: pending %v", in.Pending)
	}
	var list []api.Workspace
	decodeJSON(t, call("GET", "/workspaces", "", 200), &list)
	if len(list) != 2 {
		t.Errorf("list: %+v", list)
	}

	call("POST", "/workspaces/"+b.ID+"/exec", `{"argv":["sh","-c","echo other > a.txt"]}`, 200)
	var cr api.CommitResult
	decodeJSON(t, call("POST", "/workspaces/"+a.ID+"/commit", `{"message":"via curl"}`, 200), &cr)
	if cr.Status != api.StatusCommitted || cr.Commit == "" || cr.Receipt.PathsCaptured != 1 {
		t.Errorf("commit: %+v", cr)
	}
	decodeJSON(t, call("POST", "/workspaces/"+b.ID+"/commit", "", 409), &cr)
	if cr.Status != api.StatusConflict || strings.Join(cr.Paths, " ") != "a.txt" {
		t.Errorf("conflicting commit: %+v", cr)
	}

	var e api.Error
	decodeJSON(t, call("GET", "/workspaces/ws-nope", "", 404), &e)
	if e.Code != api.CodeNotFound {
		t.Errorf("unknown id: %+v", e)
	}
	decodeJSON(t, call("POST", "/workspaces", `{"path":"relative"}`, 400), &e)
	for _, sys := range []string{"/usr", "/proc/x", "/etc", "/usr/bin", "/var/lib", "/etc/passwd"} {
		decodeJSON(t, call("POST", "/workspaces", `{"path":"`+sys+`"}`, 400), &e)
		if !strings.Contains(e.Error, "would hide") {
			t.Errorf("a Workspace at %s: %+v", sys, e)
		}
	}
	decodeJSON(t, call("POST", "/workspaces/"+a.ID+"/exec", `{"argv":`, 400), &e)
	decodeJSON(t, call("POST", "/workspaces", `{"branhc":"main"}`, 400), &e) // misspelt: not main by default
	if e.Code != api.CodeBadRequest || !strings.Contains(e.Error, "branhc") {
		t.Errorf("an unknown field: %+v", e)
	}
	decodeJSON(t, call("GET", "/nowhere", "", 404), &e)
	if e.Code != api.CodeNotFound || !strings.Contains(e.Error, "GET /nowhere") {
		t.Errorf("an unknown route: %+v", e)
	}
	if out := call("POST", "/workspaces/"+a.ID+"/discard", "", 200); !strings.Contains(out, `"kept":[],"dropped":[]`) {
		t.Errorf("discard of a clean Workspace: %s", out)
	}
	decodeJSON(t, call("POST", "/workspaces/"+b.ID+"/discard?al=1", "", 400), &e) // a typo: not a discard
	if e.Code != api.CodeBadRequest || !strings.Contains(e.Error, `unknown parameter "al"`) {
		t.Errorf("discard with a mistyped parameter: %+v", e)
	}
	decodeJSON(t, call("POST", "/workspaces/"+b.ID+"/discard", `{"all":true}`, 400), &e)
	decodeJSON(t, call("DELETE", "/workspaces/"+b.ID+"?discard=yes", "", 400), &e)
	decodeJSON(t, call("DELETE", "/workspaces/"+b.ID+"?discard=1&discard=0", "", 400), &e) // which one?
	if !strings.Contains(e.Error, "given 2 times") {
		t.Errorf("a parameter given twice: %+v", e)
	}
	for _, c := range []struct{ path, body, want string }{
		{"/workspaces/" + a.ID + "/exec?stream=yes", `{"argv":["true"]}`, "want a boolean"},
		{"/workspaces/" + a.ID + "/exec?strem=1", `{"argv":["true"]}`, `unknown parameter "strem"`},
		{"/workspaces/" + b.ID + "/commit?force=1", "", "takes no parameters"}, // force is in the body
		{"/workspaces/" + b.ID + "/commit", `{"force":true} {"force":false}`, "after the JSON object"},
		{"/workspaces/" + b.ID + "/commit", `null`, "want a JSON object"},
		{"/workspaces", `["main"]`, "want a JSON object"},
	} {
		decodeJSON(t, call("POST", c.path, c.body, 400), &e)
		if e.Code != api.CodeBadRequest || !strings.Contains(e.Error, c.want) {
			t.Errorf("POST %s %s: %+v, want an error saying %q", c.path, c.body, e, c.want)
		}
	}
	decodeJSON(t, call("POST", "/workspaces", `{"branch":"../x"}`, 400), &e)
	if e.Code != api.CodeBadRequest || !strings.Contains(e.Error, "branch name") {
		t.Errorf("a branch name that cannot be one: %+v", e)
	}
	decodeJSON(t, call("POST", "/health", "", 405), &e)
	if e.Code != api.CodeBadRequest || !strings.Contains(e.Error, "method not allowed") {
		t.Errorf("a known route with another method: %+v", e)
	}
	decodeJSON(t, call("DELETE", "/workspaces/"+b.ID, "", 409), &e)
	if e.Code != api.CodeDirty {
		t.Errorf("ending a dirty Workspace: %+v", e)
	}
	if m := call("GET", "/metrics", "", 200); !strings.Contains(m, "layerfs_") {
		t.Errorf("metrics:\n%s", m)
	}
	call("DELETE", "/workspaces/"+b.ID+"?discard=1", "", 200)
	call("DELETE", "/workspaces/"+a.ID, "", 200)
	decodeJSON(t, call("GET", "/health", "", 200), &health)
	if health.Workspaces != 0 {
		t.Errorf("health after ending both: %+v", health)
	}
}

// TestWSCommandAgainstDaemon drives a daemon process with the layerfs ws
// CLI: create, ls, exec (output and exit code pass through), inspect,
// commit (human and --json), a conflict (exit 4), discard, end (refused
// while dirty, exit 4; --discard), and errors for a bad id (exit 3) and a
// missing socket (exit 2). layerfs log then shows the commit.
func TestWSCommandAgainstDaemon(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, map[string]string{"a.txt": "a\n"})
	storePath := initStore(t, src)
	p := startDaemonProc(t, storePath, filepath.Join(t.TempDir(), "state"))
	ws := func(wantCode int, args ...string) (string, string) {
		t.Helper()
		cmd := exec.Command(layerfsBin, append([]string{"ws"}, args...)...)
		cmd.Env = append(os.Environ(), "LAYERFS_SOCKET="+p.socket)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != wantCode {
			t.Fatalf("layerfs ws %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, wantCode, stdout.String(), stderr.String())
		}
		return stdout.String(), stderr.String()
	}

	out, _ := ws(0, "create")
	a := strings.TrimSpace(out)
	src2 := filepath.Join(t.TempDir(), "src")
	out, _ = ws(0, "create", "--path", src2)
	b := strings.TrimSpace(out)
	if out, _ := ws(0, "ls"); !strings.Contains(out, a) || !strings.Contains(out, b) {
		t.Errorf("ws ls:\n%s", out)
	}
	if out, errOut := ws(5, "exec", a, "--", "sh", "-c", "echo cli > a.txt; echo new > b.txt; cat a.txt; echo oops >&2; exit 5"); out != "cli\n" || errOut != "oops\n" {
		t.Errorf("ws exec: %q %q", out, errOut)
	}
	if _, errOut := ws(3, "exec", "--cwd", "sub", b, "--", "pwd"); !strings.Contains(errOut, "cwd "+src2+"/sub: no such directory (not_found)") { // not yet
		t.Errorf("ws exec --cwd of a missing directory: %q", errOut)
	}
	if _, errOut := ws(2, "exec", "--cwd", "../", b, "--", "pwd"); !strings.Contains(errOut, `cwd "../" leaves the Workspace`) {
		t.Errorf("ws exec --cwd ../: %q", errOut)
	}
	if out, _ := ws(6, "exec", "--json", b, "--", "sh", "-c", "exit 6"); !strings.Contains(out, `"exit_code": 6`) {
		t.Errorf("ws exec --json of exit 6: %q", out)
	}
	// A program that is not there, or cannot be run: a shell's 127 and 126.
	if _, errOut := ws(127, "exec", b, "--", "no-such-program"); !strings.Contains(errOut, "command_not_found") {
		t.Errorf("ws exec of a missing program: %q", errOut)
	}
	ws(0, "exec", b, "--", "sh", "-c", "echo x > not-executable")
	if _, errOut := ws(126, "exec", b, "--", "./not-executable"); !strings.Contains(errOut, "command_not_executable") {
		t.Errorf("ws exec of a file that cannot run: %q", errOut)
	}
	ws(0, "exec", b, "--", "rm", "not-executable")
	ws(0, "exec", b, "--", "mkdir", "sub")
	if out, _ := ws(0, "exec", "--cwd", "sub", b, "--", "pwd"); out != src2+"/sub\n" {
		t.Errorf("ws exec --cwd sub: %q", out)
	}
	ws(0, "exec", b, "--", "sh", "-c", "ln -s sub inside && ln -s / outside")
	if out, _ := ws(0, "exec", "--cwd", "inside", b, "--", "pwd"); out != src2+"/sub\n" { // pwd prints the physical path
		t.Errorf("ws exec --cwd through a symlink that stays inside: %q", out)
	}
	if _, errOut := ws(2, "exec", "--cwd", "outside", b, "--", "pwd"); !strings.Contains(errOut, "leaves the Workspace (through a symlink)") {
		t.Errorf("ws exec --cwd through a symlink to /: %q", errOut)
	}
	if out, _ := ws(0, "inspect", a); !strings.Contains(out, "pending  a.txt") || !strings.Contains(out, "pending  b.txt") {
		t.Errorf("ws inspect:\n%s", out)
	}
	if out, _ := ws(0, "commit", a, "-m", "from the cli"); !strings.HasPrefix(out, "committed ") {
		t.Errorf("ws commit:\n%s", out)
	}
	ws(0, "exec", b, "--", "sh", "-c", "echo b > a.txt")
	out, _ = ws(4, "commit", "--json", b)
	var cr api.CommitResult
	decodeJSON(t, out, &cr)
	if cr.Status != api.StatusConflict || strings.Join(cr.Paths, " ") != "a.txt" {
		t.Errorf("ws commit --json of a conflict: %+v", cr)
	}
	ws(4, "end", b)
	ws(0, "exec", b, "--", "mkfifo", "pipe")
	if out, _ := ws(0, "discard", b); !strings.Contains(out, "changes discarded") || !strings.Contains(out, "kept in the Workspace: pipe") {
		t.Errorf("ws discard:\n%s", out)
	}
	ws(0, "exec", b, "--", "test", "-p", "pipe")
	ws(0, "discard", "--all", b)
	ws(1, "exec", b, "--", "test", "-e", "pipe")
	if out, _ := ws(0, "inspect", "--json", b); strings.Contains(out, "pending") {
		t.Errorf("after discard: %s", out)
	}
	// Bytes that are not UTF-8 pass through stdin and stdout exactly.
	data := make([]byte, 200_000)
	rand.New(rand.NewSource(2)).Read(data)
	cat := exec.Command(layerfsBin, "ws", "exec", "--stdin", b, "--", "cat")
	cat.Env = append(os.Environ(), "LAYERFS_SOCKET="+p.socket)
	cat.Stdin = bytes.NewReader(data)
	if out, err := cat.Output(); err != nil || !bytes.Equal(out, data) {
		t.Errorf("ws exec --stdin -- cat of %d random bytes: %d bytes back, %v", len(data), len(out), err)
	}
	ws(0, "end", b)
	ws(0, "exec", a, "--", "touch", "c.txt")
	ws(0, "end", "--discard", a)
	ws(3, "inspect", a)
	cmd := exec.Command(layerfsBin, "ws", "ls")
	cmd.Env = append(os.Environ(), "LAYERFS_SOCKET=")
	// No socket named: the daemon's default, where none listens here.
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "no daemon listening on /var/lib/layerfs/daemon.sock") {
		t.Errorf("ws without a socket: %v %s", err, out)
	}
	p.stop(t)
	if out := runLayerfs(t, "log", "--store", storePath, "main"); !strings.Contains(out, "from the cli") {
		t.Errorf("layerfs log:\n%s", out)
	}
}

// TestSDKErrorsAreSentinels: what a daemon refuses comes back to the Go
// client as an APIError that errors.Is matches against the SDK's
// sentinels: an unknown Workspace or branch, a dirty end, a missing
// program.
func TestSDKErrorsAreSentinels(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, map[string]string{"a.txt": "a\n"})
	p := startDaemonProc(t, initStore(t, src), filepath.Join(t.TempDir(), "state"), "--volume=off")
	c, ctx := p.client, context.Background()
	if _, err := c.Inspect(ctx, "ws-000000000000"); !errors.Is(err, layerfs.ErrNotFound) {
		t.Errorf("inspect of an unknown Workspace: %v, want ErrNotFound", err)
	}
	if _, err := c.Create(ctx, api.CreateRequest{Branch: "nope"}); !errors.Is(err, layerfs.ErrNotFound) {
		t.Errorf("create of an unknown branch: %v, want ErrNotFound", err)
	}
	if _, err := c.Create(ctx, api.CreateRequest{Branch: "-bad"}); !errors.Is(err, layerfs.ErrBadRequest) {
		t.Errorf("create of a bad branch name: %v, want ErrBadRequest", err)
	}
	w, err := c.Create(ctx, api.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, w.ID, api.ExecRequest{Argv: []string{"no-such-program"}}); !errors.Is(err, layerfs.ErrCommandNotFound) {
		t.Errorf("exec of a missing program: %v, want ErrCommandNotFound", err)
	}
	if _, err := c.Exec(ctx, w.ID, api.ExecRequest{Argv: []string{"touch", "b.txt"}}); err != nil {
		t.Fatal(err)
	}
	err = c.End(ctx, w.ID, false)
	var ae *layerfs.APIError
	if !errors.Is(err, layerfs.ErrUncommitted) || !errors.As(err, &ae) || ae.Code != api.CodeDirty {
		t.Errorf("end with uncommitted changes: %v, want ErrUncommitted and an APIError", err)
	}
	if err := c.End(ctx, w.ID, true); err != nil {
		t.Error(err)
	}
}
