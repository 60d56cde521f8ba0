package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs"
	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/sessions"
)

// TestDaemonKill9 kills a layerfs daemon process with SIGKILL while it
// serves three dirty Workspaces, one of them with a command still running
// inside. The restarted daemon detaches the stale mounts, brings the three
// back with their changes (same ids, same pending paths, same contents),
// and commits each; killed in turn, it starts again at once, and on
// SIGTERM leaves nothing mounted.
func TestDaemonKill9(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, map[string]string{
		"a.txt": "a\n", "b.txt": "b\n", "gone.txt": "gone\n", "dir/x": "x\n", "dir/y": "y\n",
	})
	storePath := initStore(t, src)
	stateDir := filepath.Join(t.TempDir(), "state")
	p := startDaemonProc(t, storePath, stateDir)
	ctx := context.Background()

	scripts := []string{
		"echo new0 > new0.txt && mkdir -p deep/er && echo d > deep/er/f",
		"echo changed >> a.txt && rm gone.txt && yes layerfs | head -c 3000000 > big.bin",
		"mv dir dir2 && echo z > dir2/z && ln -s dir2/x link",
	}
	var ids []string
	pending := map[string][]string{}
	for _, script := range scripts {
		w, err := p.client.Create(ctx, api.CreateRequest{})
		if err != nil {
			t.Fatal(err)
		}
		execOK(t, p.client, w.ID, script)
		in, err := p.client.Inspect(ctx, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		ids, pending[w.ID] = append(ids, w.ID), in.Pending
	}
	// A command left running in the first Workspace holds its overlay
	// (and the FUSE mount below it) busy through the crash.
	out := execOK(t, p.client, ids[0], "sleep 600 </dev/null >/dev/null 2>&1 & echo $!")
	sleeper, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("background pid %q", out)
	}
	t.Cleanup(func() { syscall.Kill(sleeper, syscall.SIGKILL) })

	p.kill()
	if len(mountsUnder(stateDir)) == 0 {
		t.Fatal("the killed daemon left no mounts: the test proves nothing")
	}

	p2 := startDaemonProc(t, storePath, stateDir)
	checkMountsOnce(t, stateDir)
	// Else it would go on writing into the Workspace it was in, now
	// mounted again, beside the new daemon's commands.
	if cgroupsHere(t) && !goneSoon(sleeper) {
		t.Errorf("the crashed daemon's command %d still runs after the restart", sleeper)
	}
	list, err := p2.client.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range list {
		got = append(got, w.ID)
	}
	sort.Strings(ids)
	if !reflect.DeepEqual(got, ids) {
		t.Fatalf("after the restart: workspaces %v, want %v", got, ids)
	}
	for _, id := range ids {
		in, err := p2.client.Inspect(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(in.Pending, pending[id]) {
			t.Errorf("%s pending after the restart: %v, want %v", id, in.Pending, pending[id])
		}
	}
	leases := storeLeases(t, storePath)
	if len(leases) != 3 {
		t.Errorf("leases after the restart: %v", leases)
	}
	for _, id := range ids {
		res, err := p2.client.Commit(ctx, id, api.CommitRequest{Message: "after kill -9"})
		if err != nil || res.Status != api.StatusCommitted {
			t.Fatalf("commit %s after the restart: %v %+v", id, err, res)
		}
	}

	// A second crash, and a start at once, while the killed process may
	// still be going: its FUSE mount answers ENOTCONN meanwhile.
	p2.cmd.Process.Signal(syscall.SIGKILL)
	p3 := startDaemonProc(t, storePath, stateDir)
	<-p2.exited
	w, err := p3.client.Create(ctx, api.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := "new0\nd\na\nchanged\n3000000\nx\ny\nz\nx\n"
	if got := execOK(t, p3.client, w.ID, "cat new0.txt deep/er/f a.txt; wc -c < big.bin; ls dir2; cat link; test ! -e gone.txt && test ! -e dir"); got != want {
		t.Errorf("a new Workspace over the three commits shows %q, want %q", got, want)
	}
	if err := p3.client.End(ctx, w.ID, false); err != nil {
		t.Fatal(err)
	}
	p3.stop(t)
	if left := mountsUnder(stateDir); len(left) > 0 {
		t.Errorf("mounts left after SIGTERM:\n%s", strings.Join(left, "\n"))
	}
}

// execOK runs a shell script in a Workspace through a client and returns
// its stdout; a non-zero exit fails the test.
func execOK(t *testing.T, c *layerfs.Client, id, script string) string {
	t.Helper()
	res, err := c.Exec(context.Background(), id, api.ExecRequest{Argv: []string{"sh", "-c", script}})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("sh -c %q in %s: exit %d\n%s%s", script, id, res.ExitCode, res.Stdout, res.Stderr)
	}
	return string(res.StdoutBytes())
}

// checkMountsOnce fails if a mount point below dir is mounted more than
// once (a stale mount under a fresh one) or does not answer.
func checkMountsOnce(t *testing.T, dir string) {
	t.Helper()
	seen := map[string]int{}
	for _, m := range mountsUnder(dir) {
		seen[m]++
	}
	for m, n := range seen {
		if n > 1 {
			t.Errorf("%s is mounted %d times", m, n)
		}
		if _, err := os.ReadDir(m); err != nil {
			t.Errorf("mount %s does not answer: %v", m, err)
		}
	}
}

// storeLeases opens the Store read-only beside the daemon and lists its
// leases.
func storeLeases(t *testing.T, path string) []string {
	t.Helper()
	st, err := layerfs.Open(path, layerfs.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ls, err := st.Backend().Leases()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range ls {
		out = append(out, l.ID+"@"+l.Commit.String()[:12])
	}
	return out
}

// TestRestartAfterInterruptedRebase: a conflicting commit moves the
// Workspace's upperdir to the next generation before it records the move.
// A daemon that died between the two must come back with the moved
// upperdir — the pending changes and their marker blocks — not an empty
// one. The test makes that state by rolling the record back, while the
// daemon is down: with the Workspaces on the state directory itself, not
// on the daemon's volume, which goes with the daemon.
func TestRestartAfterInterruptedRebase(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{Volume: sessions.VolumeOff})
	a, b := d.create(t, "main"), d.create(t, "main")
	d.sh(t, a.ID, "echo A > a.txt")
	d.sh(t, b.ID, "echo B > a.txt && echo mine > b.txt")
	d.commit(t, a.ID, api.StatusCommitted)
	d.commit(t, b.ID, api.StatusConflict)
	want := d.sh(t, b.ID, "cat a.txt b.txt")
	if err := d.Daemon.Close(); err != nil {
		t.Fatal(err)
	}
	recPath := filepath.Join(d.stateDir, "ws", b.ID, "state.json")
	data, err := os.ReadFile(recPath)
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	decodeJSON(t, string(data), &rec)
	if rec["gen"] != 1.0 {
		t.Fatalf("record after the conflict: %s", data)
	}
	rec["gen"], rec["lease"] = 0, b.Lease // as saved before the rebase
	data, _ = json.Marshal(rec)
	if err := os.WriteFile(recPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	d.restart(t, sessions.VolumeOff)
	if got := d.sh(t, b.ID, "cat a.txt b.txt"); got != want {
		t.Fatalf("after the restart B reads %q, want %q", got, want)
	}
	in, err := d.Inspect(b.ID)
	if err != nil || in.Lease == b.Lease {
		t.Fatalf("after the restart B is leased on %.12s (%v), not the head it met", in.Lease, err)
	}
}

// TestCommitOverStrayNextGeneration: a commit mounts the overlay it
// follows the new head to in the next generation's directories, beside
// its capture. A crash can leave such directories behind, one a used work
// directory that overlayfs refuses; the next commit, or discard, starts
// them afresh, and nothing left in them shows in the Workspace (files in
// such an upper directory are kept aside, never removed).
func TestCommitOverStrayNextGeneration(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{Volume: sessions.VolumeOff})
	w := d.create(t, "main")
	// stray leaves what a crash during a commit would in the next
	// generation's directories.
	stray := func(t *testing.T) {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(d.stateDir, "ws", w.ID, "state.json"))
		if err != nil {
			t.Fatal(err)
		}
		var rec struct{ Gen int }
		decodeJSON(t, string(data), &rec)
		next := strconv.Itoa(rec.Gen + 1)
		writeTree(t, filepath.Join(d.stateDir, "ws", w.ID), map[string]string{
			"upper-" + next + "/junk.txt": "left by a crash\n",
		})
		if err := os.MkdirAll(filepath.Join(d.stateDir, "ws", w.ID, "work-"+next, "work", "incompat", "volatile"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stray(t)
	d.sh(t, w.ID, "echo b > b.txt")
	d.commit(t, w.ID, api.StatusCommitted)
	if got := d.sh(t, w.ID, "ls"); got != "a.txt\nb.txt\n" {
		t.Fatalf("after the commit the Workspace lists %q", got)
	}
	// Files in an upper directory no record names are moved aside, kept.
	kept, _ := filepath.Glob(filepath.Join(d.stateDir, "ws", w.ID, "upper-*.kept-*", "junk.txt"))
	if len(kept) != 1 {
		t.Fatalf("the stray upper directory's file was not kept aside: %v", kept)
	}
	d.sh(t, w.ID, "echo c > c.txt")
	d.commit(t, w.ID, api.StatusCommitted)
	if got := d.sh(t, w.ID, "cat a.txt b.txt c.txt"); got != "a\nb\nc\n" {
		t.Fatalf("after a second commit the Workspace reads %q", got)
	}

	// A discard, which also moves to the next generation, starts it
	// afresh too.
	stray(t)
	d.sh(t, w.ID, "echo dropped > d.txt")
	if _, err := d.Discard(w.ID, false); err != nil {
		t.Fatalf("discard over a stray next generation: %v", err)
	}
	if got := d.sh(t, w.ID, "ls"); got != "a.txt\nb.txt\nc.txt\n" {
		t.Fatalf("after the discard the Workspace lists %q", got)
	}
}

// TestDaemonSIGTERMKillsCommands: SIGTERM ends a daemon process promptly
// even while commands run in its Workspaces — one in the foreground of an
// exec request, one left in the background — and leaves nothing mounted
// or running; and ending a Workspace kills what it left running.
func TestDaemonSIGTERMKillsCommands(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, map[string]string{"a.txt": "a\n"})
	p := startDaemonProc(t, initStore(t, src), filepath.Join(t.TempDir(), "state"))
	ctx := context.Background()
	background := func(id string) int {
		t.Helper()
		out := execOK(t, p.client, id, "sleep 600 </dev/null >/dev/null 2>&1 & echo $!")
		pid, err := strconv.Atoi(strings.TrimSpace(out))
		if err != nil {
			t.Fatalf("background pid %q", out)
		}
		t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
		return pid
	}
	ended, err := p.client.Create(ctx, api.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	orphan := background(ended.ID)
	if err := p.client.End(ctx, ended.ID, false); err != nil {
		t.Fatal(err)
	}
	waitGone(t, orphan, "left running by an ended Workspace")

	w, err := p.client.Create(ctx, api.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	orphan = background(w.ID)
	foreground := make(chan api.ExecResult, 1)
	go func() {
		res, _ := p.client.Exec(ctx, w.ID, api.ExecRequest{Argv: []string{"sleep", "600"}})
		foreground <- res
	}()
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	p.stop(t)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("SIGTERM took %v", took)
	}
	waitGone(t, orphan, "left running in the background at SIGTERM")
	if left := mountsUnder(p.stateDir); len(left) > 0 {
		t.Errorf("mounts left after SIGTERM:\n%s", strings.Join(left, "\n"))
	}
}

// waitGone waits up to 5 s for process pid to be gone (or a zombie).
func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil || strings.Contains(string(stat), ") Z ") {
			return
		}
	}
	t.Errorf("process %d, %s, still runs", pid, what)
}

// TestRestartAfterInterruptedCarry: a discard (or a commit) moves the
// entries it keeps — ignored paths, special files — into the next
// generation's upper directory before it saves the record that names that
// generation. A crash in between restarts the Workspace on the
// generation its record names: the kept entries go back into its upper
// directory, beside the changes the discard had not dropped yet, rather
// than being set aside out of sight. The test makes that state by
// rolling the record back while the daemon is down.
func TestRestartAfterInterruptedCarry(t *testing.T) {
	d := startDaemon(t, map[string]string{".layerfsignore": "build/\n", "a.txt": "a\n", "lib/l.go": "package lib\n"},
		sessions.Config{Volume: sessions.VolumeOff})
	w := d.create(t, "main")
	d.sh(t, w.ID, "mkdir -p build/sub && echo out > build/sub/o && mkfifo pipe && mkdir lib/build && echo lib > lib/build/o")
	if _, err := d.Discard(w.ID, false); err != nil {
		t.Fatal(err)
	}
	if err := d.Daemon.Close(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(d.stateDir, "ws", w.ID)
	recPath := filepath.Join(dir, "state.json")
	data, err := os.ReadFile(recPath)
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	decodeJSON(t, string(data), &rec)
	gen := int(rec["gen"].(float64))
	rec["gen"] = gen - 1 // as saved before the discard
	data, _ = json.Marshal(rec)
	if err := os.WriteFile(recPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	// The old generation's upper directory, as the discard left it: the
	// change it was dropping, and lib, whose kept entry it moved out.
	old := filepath.Join(dir, "upper-"+strconv.Itoa(gen-1))
	writeTree(t, old, map[string]string{"a.txt": "changed\n"})
	if err := os.Mkdir(filepath.Join(old, "lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	d.restart(t, sessions.VolumeOff)
	if got := d.sh(t, w.ID, "cat a.txt build/sub/o lib/build/o lib/l.go && test -p pipe && echo ok"); got != "changed\nout\nlib\npackage lib\nok\n" {
		t.Fatalf("after the restart the Workspace reads %q", got)
	}
	// lib's times, touched when its entry moved out, are the Commit's
	// again: only the change the discard was dropping is pending.
	if in, err := d.Inspect(w.ID); err != nil || !slices.Equal(in.Pending, []string{"a.txt"}) {
		t.Errorf("pending after the restart: %v, %v; want [a.txt]", in.Pending, err)
	}
	if aside, _ := filepath.Glob(filepath.Join(dir, "upper-*.kept-*")); len(aside) != 0 {
		t.Errorf("set aside: %v", aside)
	}
	if got, err := d.Discard(w.ID, false); err != nil || len(got.Kept) != 3 {
		t.Fatalf("a discard after the restart kept %v, %v; want build, lib/build and pipe", got.Kept, err)
	}
	if got := d.sh(t, w.ID, "cat a.txt build/sub/o lib/build/o && test -p pipe && echo ok"); got != "a\nout\nlib\nok\n" {
		t.Fatalf("after a second discard the Workspace reads %q", got)
	}
}

// TestDaemonStartsOverDeadFUSEMount: a crashed daemon's FUSE mount of the
// Store answers ENOTCONN to everything, even a stat of its mount point,
// until it is detached. A daemon starting over it detaches it first. A
// FUSE mount whose connection is aborted (/sys/fs/fuse/connections) is
// such a mount, made on purpose.
func TestDaemonStartsOverDeadFUSEMount(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, map[string]string{"a.txt": "a\n"})
	storePath := initStore(t, src)
	stateDir := filepath.Join(t.TempDir(), "state")
	lower := filepath.Join(stateDir, "lower")
	if err := os.MkdirAll(lower, 0o700); err != nil {
		t.Fatal(err)
	}
	server, err := gofs.Mount(lower, &gofs.Inode{}, &gofs.Options{MountOptions: fuse.MountOptions{DirectMount: true, FsName: "dead"}})
	if err != nil {
		t.Skipf("no FUSE mount to kill: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(lower, unix.MNT_DETACH) })
	var st unix.Stat_t
	if err := unix.Stat(lower, &st); err != nil {
		t.Fatal(err)
	}
	const conns = "/sys/fs/fuse/connections"
	abort := fmt.Sprintf("%s/%d/abort", conns, unix.Minor(st.Dev))
	if _, err := os.Stat(abort); err != nil {
		if err := unix.Mount("fusectl", conns, "fusectl", 0, ""); err != nil {
			t.Skipf("no %s to abort the FUSE connection with: %v", conns, err)
		}
		t.Cleanup(func() { unix.Unmount(conns, 0) })
	}
	if err := os.WriteFile(abort, []byte("1"), 0); err != nil {
		t.Fatalf("abort the FUSE connection: %v", err)
	}
	server.Wait()
	if err := unix.Stat(lower, &st); !errors.Is(err, unix.ENOTCONN) {
		t.Fatalf("stat of the dead mount: %v, want ENOTCONN", err)
	}
	p := startDaemonProc(t, storePath, stateDir)
	// The same socket: refused before the state directory is looked at,
	// naming the daemon there too.
	if _, err := sessions.Listen(p.socket); !errors.Is(err, sessions.ErrSocketInUse) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", p.cmd.Process.Pid)) {
		t.Fatalf("listen on a served socket: %v; want ErrSocketInUse naming pid %d", err, p.cmd.Process.Pid)
	}
	w, err := p.client.Create(context.Background(), api.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := execOK(t, p.client, w.ID, "cat a.txt"); got != "a\n" {
		t.Fatalf("a Workspace reads %q", got)
	}
	p.stop(t)
}

// TestStateDirInUse: a second daemon on a state directory another one
// serves is refused, naming it, and leaves the first one's mounts alone;
// once the first is gone the directory is free.
func TestStateDirInUse(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, map[string]string{"a.txt": "a\n"})
	storePath := initStore(t, src)
	stateDir := filepath.Join(t.TempDir(), "state")
	p := startDaemonProc(t, storePath, stateDir)
	st, err := layerfs.Open(storePath, layerfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	second, err := sessions.Start(sessions.Config{Store: st.Backend(), StateDir: stateDir, Self: layerfsBin})
	if err == nil {
		second.Close()
		t.Fatal("a second daemon started on a state directory in use")
	}
	if !errors.Is(err, sessions.ErrStateInUse) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", p.cmd.Process.Pid)) {
		t.Fatalf("second daemon: %v; want ErrStateInUse naming pid %d", err, p.cmd.Process.Pid)
	}
	w, err := p.client.Create(context.Background(), api.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := execOK(t, p.client, w.ID, "cat a.txt"); got != "a\n" {
		t.Fatalf("the first daemon's Workspace reads %q", got)
	}
	p.kill()
	again, err := sessions.Start(sessions.Config{Store: st.Backend(), StateDir: stateDir, Self: layerfsBin})
	if err != nil {
		t.Fatalf("after the first daemon died: %v", err)
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
}
