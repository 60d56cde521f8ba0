package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/publish"
	"github.com/layerfs/layerfs/sessions"
)

// TestCommitRefusedWhileProcessesRun: a process left running in the
// Workspace would write into the view the commit leaves behind, so the
// commit is refused unless allowed; exec itself returns although the
// process keeps its output open.
func TestCommitRefusedWhileProcessesRun(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{})
	w := d.create(t, "main")
	start := time.Now()
	res, err := d.Exec(context.Background(), w.ID, api.ExecRequest{Argv: []string{"sh", "-c", "echo x > a.txt; sleep 300 & echo started"}}, nil)
	if err != nil || res.ExitCode != 0 || !strings.Contains(res.Stdout, "started") {
		t.Fatalf("exec with a background process: %+v %v", res, err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("exec waited %v for the background process's output", took)
	}
	_, err = d.Commit(w.ID, api.CommitRequest{})
	if !errors.Is(err, sessions.ErrRunning) {
		t.Fatalf("commit with a process running: %v", err)
	}
	if got := d.read(t, "main", "a.txt"); got != "a\n" {
		t.Fatalf("a refused commit wrote %q", got)
	}
	res2, err := d.Commit(w.ID, api.CommitRequest{AllowRunning: true})
	if err != nil || res2.Status != api.StatusCommitted {
		t.Fatalf("commit allowing running processes: %+v %v", res2, err)
	}
	if err := d.End(w.ID, true); err != nil { // ends the sleep too
		t.Fatal(err)
	}
}

// TestEndKillsWhatALaterCommandLeft: a commit that finds nothing running
// stops watching the Workspace's namespace; a command after it must be
// watched again, so that ending the Workspace kills what it left behind.
func TestEndKillsWhatALaterCommandLeft(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{})
	w := d.create(t, "main")
	d.sh(t, w.ID, "echo b > a.txt")
	d.commit(t, w.ID, api.StatusCommitted)
	out := d.sh(t, w.ID, "sleep 300 >/dev/null 2>&1 & echo $!")
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("pid of the background sleep: %q", out)
	}
	if !alive(pid) {
		t.Fatalf("the background sleep (pid %d) is not running", pid)
	}
	if err := d.End(w.ID, true); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("pid %d still runs 5 s after its Workspace ended", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses.
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// TestExecKilledIsGone: what a timeout or a client gone away killed is
// gone when exec returns, so a commit right after it is not refused for
// commands still running. The command's own process was reaped, but the
// rest of its process group, sent SIGKILL at the same moment, could still
// be on its way out.
func TestExecKilledIsGone(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{})
	w := d.create(t, "main")
	for i := 0; i < 20; i++ {
		res, err := d.Exec(context.Background(), w.ID, api.ExecRequest{Argv: []string{"sh", "-c", "sleep 300 & sleep 300 & sleep 300 & wait"}, TimeoutMS: 20}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !res.TimedOut {
			t.Fatalf("not timed out: %+v", res)
		}
		if _, err := d.Commit(w.ID, api.CommitRequest{}); err != nil {
			t.Fatalf("commit %d right after a command timed out: %v", i, err)
		}
	}
}

// TestExecTimeoutAndCancel: a command past its timeout is killed with its
// whole process group and reported as timed out; a request whose client
// goes away kills its command too; a command given no stdin reads
// /dev/null rather than waiting for input.
func TestExecTimeoutAndCancel(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{})
	w := d.create(t, "main")
	ctx := context.Background()

	start := time.Now()
	res, err := d.Exec(ctx, w.ID, api.ExecRequest{Argv: []string{"sh", "-c", "sleep 300 & sleep 300"}, TimeoutMS: 200}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode != 128+int(syscall.SIGKILL) {
		t.Errorf("past its timeout: timed_out %v, exit %d; want true, %d", res.TimedOut, res.ExitCode, 128+int(syscall.SIGKILL))
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("a 200 ms timeout returned after %v", took)
	}

	// A timeout longer than a time.Duration holds (292 years) is as good
	// as none: it wrapped round to a negative one, and the command was
	// killed at once, as timed out.
	for _, ms := range []int64{math.MaxInt64, math.MaxInt64/int64(time.Millisecond) + 1} {
		res, err = d.Exec(ctx, w.ID, api.ExecRequest{Argv: []string{"sh", "-c", "sleep 0.1; echo ok"}, TimeoutMS: ms}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.TimedOut || res.ExitCode != 0 || res.Stdout != "ok\n" {
			t.Errorf("timeout_ms %d: timed_out %v, exit %d, stdout %q; want false, 0, ok", ms, res.TimedOut, res.ExitCode, res.Stdout)
		}
	}

	// The client goes away: the command goes with it, and a later command
	// finds nothing left (a commit is not refused for running processes).
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(200*time.Millisecond, cancel)
	res, err = d.Exec(cctx, w.ID, api.ExecRequest{Argv: []string{"sh", "-c", "echo x > a.txt; sleep 300"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.TimedOut || res.ExitCode != 128+int(syscall.SIGKILL) {
		t.Errorf("cancelled: timed_out %v, exit %d; want false, %d", res.TimedOut, res.ExitCode, 128+int(syscall.SIGKILL))
	}
	if _, err := d.Commit(w.ID, api.CommitRequest{}); err != nil {
		t.Errorf("commit after the cancelled command: %v", err)
	}

	start = time.Now()
	res = d.exec(t, w.ID, nil, "sh", "-c", "cat; echo done")
	if res.ExitCode != 0 || res.Stdout != "done\n" || time.Since(start) > 10*time.Second {
		t.Errorf("a command reading stdin, given none: %+v after %v", res, time.Since(start))
	}
	res, err = d.Exec(ctx, w.ID, api.ExecRequest{Argv: []string{"cat"}, Stdin: "in\n"}, nil)
	if err != nil || res.Stdout != "in\n" {
		t.Errorf("cat with stdin: %+v, %v", res, err)
	}
}

// TestCommandsThatLeaveTheNamespaceAreFound: a command that moves to a
// mount namespace of its own (unshare -m) is still the Workspace's: a
// commit sees it running, and end kills it. The daemon had looked for
// processes by mount namespace, and such a one outlived its Workspace,
// holding its overlay.
func TestCommandsThatLeaveTheNamespaceAreFound(t *testing.T) {
	if !cgroupsHere(t) {
		t.Skip("no writable cgroup2 hierarchy: processes are found by mount namespace")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare: ", err)
	}
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{})
	w := d.create(t, "main")
	pid := startBackground(t, d, w.ID, "echo x > a.txt; setsid unshare -m --propagation private sleep 300 </dev/null >/dev/null 2>&1 & echo $!")
	// unshare execs sleep once its namespace is made: wait for that.
	for i := 0; i < 200; i++ {
		if comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); strings.TrimSpace(string(comm)) == "sleep" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := d.Commit(w.ID, api.CommitRequest{}); !errors.Is(err, sessions.ErrRunning) {
		t.Errorf("commit with a command running in a namespace of its own: %v, want commands_running", err)
	}
	if err := d.End(w.ID, true); err != nil {
		t.Fatal(err)
	}
	if !goneSoon(pid) {
		t.Errorf("process %d, in a namespace of its own, outlived its Workspace", pid)
	}
}

// cgroupsHere reports whether this machine has a writable cgroup2
// hierarchy for the daemon to run commands in (it tries to make a cgroup
// where the daemon would); with LAYERFS_REQUIRE_ROOT=1 it must.
func cgroupsHere(t *testing.T) bool {
	t.Helper()
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	self, _ := os.ReadFile("/proc/self/cgroup")
	ok := false
	for _, line := range strings.Split(string(mi), "\n") {
		pre, post, found := strings.Cut(line, " - ")
		f := strings.Fields(pre)
		if !found || len(f) < 5 || !strings.HasPrefix(post, "cgroup2 ") || f[3] != "/" {
			continue
		}
		for _, c := range strings.Split(string(self), "\n") {
			if rest, isV2 := strings.CutPrefix(c, "0::"); isV2 {
				probe := filepath.Join(f[4], rest, fmt.Sprintf("layerfs-probe-%d", os.Getpid()))
				if os.Mkdir(probe, 0o755) == nil {
					os.Remove(probe)
					ok = true
				}
			}
		}
		break
	}
	if !ok && os.Getenv("LAYERFS_REQUIRE_ROOT") == "1" {
		t.Fatal("LAYERFS_REQUIRE_ROOT=1 but there is no writable cgroup2 hierarchy for the daemon's commands")
	}
	return ok
}

// goneSoon reports whether process pid has exited (or is a zombie) within
// about five seconds.
func goneSoon(pid int) bool {
	for i := 0; i < 500; i++ {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return true
		}
		if f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(f) > 0 && f[0] == "Z" {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// TestConflictWithCommandsRunning: a commit with allow_running that
// conflicts rebases the Workspace, rewriting its upperdir: the commands
// still running there are ended first (as a landed commit's switch ends
// them), not left writing into an upperdir under two overlays.
func TestConflictWithCommandsRunning(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{})
	a, b := d.create(t, "main"), d.create(t, "main")
	ctx := context.Background()
	if res, err := d.Exec(ctx, a.ID, api.ExecRequest{Argv: []string{"sh", "-c", "echo A > a.txt"}}, nil); err != nil || res.ExitCode != 0 {
		t.Fatalf("exec in a: %+v %v", res, err)
	}
	if res, err := d.Commit(a.ID, api.CommitRequest{}); err != nil || res.Status != api.StatusCommitted {
		t.Fatalf("commit a: %+v %v", res, err)
	}
	pid := startBackground(t, d, b.ID, "echo B > a.txt; (while :; do date >> live.txt; sleep 0.05; done) </dev/null >/dev/null 2>&1 & echo $!")
	cr, err := d.Commit(b.ID, api.CommitRequest{AllowRunning: true})
	if err != nil || cr.Status != api.StatusConflict {
		t.Fatalf("commit b: %+v %v", cr, err)
	}
	if !goneSoon(pid) {
		t.Errorf("the loop %d still runs after the rebase rewrote its Workspace", pid)
	}
	out, err := d.Exec(ctx, b.ID, api.ExecRequest{Argv: []string{"cat", "a.txt"}}, nil)
	if err != nil || !strings.Contains(out.Stdout, "<<<<<<< ours") {
		t.Errorf("a.txt after the conflict: %+v %v", out, err)
	}
	if err := d.End(b.ID, true); err != nil {
		t.Fatal(err)
	}
}

// TestDiscardEndsWhatRuns: a discard ends the processes still running in
// the Workspace, which would go on in the view it drops, and says how
// many; the Workspace then runs commands as before.
func TestDiscardEndsWhatRuns(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{})
	w := d.create(t, "main")
	ctx := context.Background()
	pid := startBackground(t, d, w.ID, "echo x > a.txt; sleep 300 </dev/null >/dev/null 2>&1 & echo $!")
	dr, err := d.Discard(w.ID, false)
	if err != nil || dr.EndedCommands != 1 {
		t.Fatalf("discard: %+v %v, want 1 ended", dr, err)
	}
	if !goneSoon(pid) {
		t.Errorf("process %d outlived the discard", pid)
	}
	out, err := d.Exec(ctx, w.ID, api.ExecRequest{Argv: []string{"cat", "a.txt"}}, nil)
	if err != nil || out.ExitCode != 0 || out.Stdout != "a\n" {
		t.Errorf("after the discard: %+v %v", out, err)
	}
	if dr, err := d.Discard(w.ID, false); err != nil || dr.EndedCommands != 0 {
		t.Errorf("a discard with nothing running: %+v %v", dr, err)
	}
}

// TestShutdownEndsRunningCommands: SIGTERM while a command runs ends it
// at once; the daemon does not wait for it (it waited the whole grace
// period of its HTTP server, 5 s, before).
func TestShutdownEndsRunningCommands(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, map[string]string{"a.txt": "a\n"})
	p := startDaemonProc(t, initStore(t, src), filepath.Join(t.TempDir(), "state"))
	ctx := context.Background()
	w, err := p.client.Create(ctx, api.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		res api.ExecResult
		err error
	}
	got := make(chan result, 1)
	go func() {
		res, err := p.client.Exec(ctx, w.ID, api.ExecRequest{Argv: []string{"sleep", "60"}})
		got <- result{res, err}
	}()
	time.Sleep(300 * time.Millisecond) // the command has started
	start := time.Now()
	p.stop(t)
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("SIGTERM with a command running took %v", took)
	}
	select {
	case r := <-got:
		if r.err == nil && r.res.ExitCode != 128+int(syscall.SIGKILL) {
			t.Errorf("the command's end: %+v", r.res)
		}
	case <-time.After(5 * time.Second):
		t.Error("the exec request did not end with the daemon")
	}
}

// TestWorkspaceSeesItsLeaseAfterFollowing: after a commit the Workspace
// follows a head that holds its commit; an edit main makes afterwards
// (here just after the commit, or while it is under way) is not in its
// view, unless the commit landed on it, and the same line changed in the
// Workspace then conflicts. (A helper once saw such a commit land as
// merged: its sed had matched nothing, as its first commit had landed on
// main's edit, and a file rewritten unchanged merges with head's new
// text. This repeats the sequence, both ways.)
func TestWorkspaceSeesItsLeaseAfterFollowing(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "line1\nline2\nline3\n", "b.txt": "b\n"}, sessions.Config{})
	for i := 0; i < 12; i++ {
		w := d.create(t, "main")
		d.sh(t, w.ID, fmt.Sprintf("echo %d >> b.txt", i))
		type result struct {
			res api.CommitResult
			err error
		}
		done := make(chan result, 1)
		commit := func() {
			res, err := d.Commit(w.ID, api.CommitRequest{})
			done <- result{res, err}
		}
		if i%2 == 0 {
			go commit() // main's edit races it
			time.Sleep(time.Duration(i) * time.Millisecond)
		} else {
			commit()
		}
		next := fmt.Sprintf("line1\nmain-%d\nline3\n", i)
		main, err := d.st.FS("main") // at main's head now
		if err != nil {
			t.Fatal(err)
		}
		if res, err := main.Write("a.txt", []byte(next)); err != nil || res.Status != publish.Committed {
			t.Fatalf("round %d: main's edit: %+v %v", i, res, err)
		}
		r := <-done
		if r.err != nil || r.res.Status != api.StatusCommitted {
			t.Fatalf("round %d: first commit: %+v %v", i, r.res, r.err)
		}
		in, err := d.Inspect(w.ID)
		if err != nil {
			t.Fatal(err)
		}
		view := d.sh(t, w.ID, "cat a.txt")
		onLease, err := d.st.FS(in.Lease)
		if err != nil {
			t.Fatal(err)
		}
		want, err := onLease.Read("a.txt")
		if err != nil || view != string(want) {
			t.Fatalf("round %d: the Workspace shows %q, its lease %s holds %q (%v)", i, view, in.Lease[:12], want, err)
		}
		d.sh(t, w.ID, fmt.Sprintf("sed -i 2s/.*/ws-%d/ a.txt", i))
		res, err := d.Commit(w.ID, api.CommitRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if wantConflict := view != next; wantConflict && res.Status != api.StatusConflict {
			after, _ := d.st.FS("main")
			got, _ := after.Read("a.txt")
			baseFS, _ := d.st.FS(in.Lease)
			base, _ := baseFS.Read("a.txt")
			t.Fatalf("round %d: the same line changed on both sides: %s merged %v; base %q, main had %q, now %q", i, res.Status, res.Merged, base, next, got)
		}
		if err := d.End(w.ID, true); err != nil {
			t.Fatal(err)
		}
	}
}

// startBackground runs script in Workspace id, which must start a process
// in the background and print its pid, and returns the pid; the process
// is killed when the test ends.
func startBackground(t *testing.T, d *testDaemon, id, script string) int {
	t.Helper()
	res, err := d.Exec(context.Background(), id, api.ExecRequest{Argv: []string{"sh", "-c", script}}, nil)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec %q: %+v %v", script, res, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(res.Stdout))
	if err != nil {
		t.Fatalf("pid %q", res.Stdout)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	return pid
}
