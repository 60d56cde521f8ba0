package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/layerfs/layerfs"
	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/sessions"
	"github.com/layerfs/layerfs/store"
)

var errInjected = errors.New("injected failure")

// failAt makes the daemon fail at failpoint name the nth time it is
// reached, unless the test ended or the returned function was called.
func failAt(t *testing.T, name string, nth int) (clear func()) {
	var reached atomic.Int32
	sessions.SetFailpointForTest(name, func() error {
		if int(reached.Add(1)) == nth {
			return errInjected
		}
		return nil
	})
	clear = func() { sessions.SetFailpointForTest(name, nil) }
	t.Cleanup(clear)
	return clear
}

// TestSwitchFailingHalfWay: a commit's switch to the new head's view
// fails at the host path or in the Workspace's namespace. The Workspace
// stays wholly where it was — the view its commands see, the one at its
// host path, its record and lease — so what a command writes next is
// pending, in the upperdir the daemon captures. The switch showed the
// new view in the namespace before it attached it at the host path, and
// a failure there went back to the old generation's record while the
// namespace went on showing the new view, over an upperdir then removed:
// the next command's writes went nowhere the daemon looks.
func TestSwitchFailingHalfWay(t *testing.T) {
	for _, fp := range []string{sessions.FailpointHostPath, sessions.FailpointNamespace} {
		t.Run(fp, func(t *testing.T) {
			d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{Volume: sessions.VolumeOff})
			w := d.create(t, "main")
			d.sh(t, w.ID, "echo mine >> a.txt") // and the next view is made ahead
			clear := failAt(t, fp, 1)
			if res, err := d.Commit(w.ID, api.CommitRequest{}); !errors.Is(err, errInjected) {
				t.Fatalf("the commit through a failing switch: %+v, %v", res, err)
			}
			clear()
			// What landed (a.txt) is not pending.
			checkOnOldView(t, d, w, []string{"later.txt"})
			// The next commit moves it onto what landed, and lands
			// what was written since.
			d.commit(t, w.ID, api.StatusCommitted)
			if got := d.read(t, "main", "a.txt") + d.read(t, "main", "later.txt"); got != "a\nmine\nlater\n" {
				t.Fatalf("main after the second commit: %q", got)
			}
		})
	}
}

// TestCommitAfterSwitchFailed: a commit lands, but the Workspace's switch
// to the new view fails; a command appends a line to the file the commit
// changed. The next commit first moves the Workspace onto the Commit that
// landed, and lands the new line alone: cleanly, the line once. It was
// based on the old lease, whose text the gate merged with the landed
// one's: the Workspace's own line came back between marker blocks, a
// conflict with itself.
func TestCommitAfterSwitchFailed(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{Volume: sessions.VolumeOff})
	w := d.create(t, "main")
	d.sh(t, w.ID, "echo mine >> a.txt")
	failSwitch(t, d, w.ID)
	landed := d.head(t)
	d.sh(t, w.ID, "echo later >> a.txt")
	res := d.commit(t, w.ID, api.StatusCommitted)
	if len(res.Markers) != 0 || len(res.Conflicts) != 0 || res.Head != landed {
		t.Fatalf("the commit after the failed switch: %+v (landed %.12s)", res, landed)
	}
	if got := d.read(t, "main", "a.txt"); got != "a\nmine\nlater\n" {
		t.Fatalf("main's a.txt: %q", got)
	}
	in, err := d.Inspect(w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if in.Lease != d.head(t) || len(in.Pending) != 0 || in.Commits != 2 {
		t.Fatalf("after the commit: lease %.12s (head %.12s), pending %v, %d commits", in.Lease, d.head(t), in.Pending, in.Commits)
	}
	if got := d.sh(t, w.ID, "cat a.txt"); got != "a\nmine\nlater\n" {
		t.Fatalf("the Workspace reads %q", got)
	}
}

// TestDiscardAfterSwitchFailed: after a commit whose switch failed, a
// discard drops what was written since, not what the commit landed: the
// Workspace is then on the Commit that landed, showing its text.
func TestDiscardAfterSwitchFailed(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{Volume: sessions.VolumeOff})
	w := d.create(t, "main")
	d.sh(t, w.ID, "echo mine >> a.txt")
	failSwitch(t, d, w.ID)
	landed := d.head(t)
	d.sh(t, w.ID, "echo later >> a.txt && echo new > n.txt")
	if _, err := d.Discard(w.ID, false); err != nil {
		t.Fatal(err)
	}
	in, err := d.Inspect(w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if in.Lease != landed || len(in.Pending) != 0 || in.Commits != 1 {
		t.Fatalf("after the discard: lease %.12s (landed %.12s), pending %v, %d commits", in.Lease, landed, in.Pending, in.Commits)
	}
	if got := d.sh(t, w.ID, "cat a.txt; test ! -e n.txt"); got != "a\nmine\n" {
		t.Fatalf("the Workspace reads %q", got)
	}
	// Nothing of it lands again.
	if res := d.commit(t, w.ID, api.StatusUpToDate); res.Head != landed {
		t.Fatalf("the commit after the discard: %+v", res)
	}
}

// TestEndAfterSwitchFailed: after a commit whose switch failed, with
// nothing written since, the Workspace ends without discard: what it
// shows pending landed. It was refused, the landed changes taken for
// uncommitted ones.
func TestEndAfterSwitchFailed(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{Volume: sessions.VolumeOff})
	w := d.create(t, "main")
	d.sh(t, w.ID, "echo mine >> a.txt")
	failSwitch(t, d, w.ID)
	if err := d.End(w.ID, false); err != nil {
		t.Fatal(err)
	}
	if got := d.read(t, "main", "a.txt"); got != "a\nmine\n" {
		t.Fatalf("main's a.txt: %q", got)
	}
}

// TestConflictAfterSwitchFailed: another commit changed a file, this
// Workspace's commit, which changed it elsewhere, landed merged, but its
// switch failed; then the Workspace changes the line the other commit
// did. The next commit moves it onto the Commit that landed and stops
// there, as at a conflict: marker blocks in the file, nothing landed,
// and the merge is the Workspace's to finish.
func TestConflictAfterSwitchFailed(t *testing.T) {
	d := startDaemon(t, map[string]string{"m.txt": "1\n2\n3\n4\n5\n6\n7\n"}, sessions.Config{Volume: sessions.VolumeOff})
	other, w := d.create(t, "main"), d.create(t, "main")
	d.sh(t, other.ID, "sed -i 1s/1/one/ m.txt")
	d.commit(t, other.ID, api.StatusCommitted)
	d.sh(t, w.ID, "sed -i 7s/7/seven/ m.txt")
	failSwitch(t, d, w.ID)
	landed := d.head(t)
	d.sh(t, w.ID, "sed -i 1s/1/uno/ m.txt")
	res := d.commit(t, w.ID, api.StatusConflict)
	if !slices.Equal(res.Markers, []string{"m.txt"}) || res.Head != landed || d.head(t) != landed {
		t.Fatalf("the commit after the failed switch: %+v (landed %.12s, head %.12s)", res, landed, d.head(t))
	}
	got := d.sh(t, w.ID, "cat m.txt")
	if !strings.Contains(got, "<<<<<<<") || !strings.Contains(got, "uno") || !strings.HasSuffix(got, "6\nseven\n") {
		t.Fatalf("the Workspace's m.txt: %q", got)
	}
	d.sh(t, w.ID, "printf 'uno\\n2\\n3\\n4\\n5\\n6\\nseven\\n' > m.txt")
	d.commit(t, w.ID, api.StatusCommitted)
	if got := d.read(t, "main", "m.txt"); got != "uno\n2\n3\n4\n5\n6\nseven\n" {
		t.Fatalf("main's m.txt: %q", got)
	}
}

// TestInspectAfterSwitchFailed: after a commit whose switch failed, the
// Workspace is still on the view before it, but inspect lists as pending
// only what the Commit that landed lacks — what the next commit, discard
// or end would find once on it — not what landed. A file the commit
// merged with another's change to it, and nothing written since, is not
// pending either. Inspect listed everything the commit had landed.
func TestInspectAfterSwitchFailed(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n", "m.txt": "1\n2\n3\n4\n5\n6\n7\n"}, sessions.Config{Volume: sessions.VolumeOff})
	other, w := d.create(t, "main"), d.create(t, "main")
	d.sh(t, other.ID, "sed -i 1s/1/one/ m.txt")
	d.commit(t, other.ID, api.StatusCommitted)
	d.sh(t, w.ID, "echo mine >> a.txt && echo n > n.txt && sed -i 7s/7/seven/ m.txt")
	failSwitch(t, d, w.ID)
	pending := func(want ...string) {
		t.Helper()
		in, err := d.Inspect(w.ID)
		if err != nil || in.Lease != w.Lease || !slices.Equal(in.Pending, want) {
			t.Fatalf("inspect: lease %.12s (was %.12s), pending %v, %v; want %v", in.Lease, w.Lease, in.Pending, err, want)
		}
	}
	pending()
	d.sh(t, w.ID, "echo later >> a.txt && rm n.txt && echo x > x.txt")
	pending("a.txt", "n.txt", "x.txt")
	res := d.commit(t, w.ID, api.StatusCommitted)
	if got := d.read(t, "main", "a.txt") + d.read(t, "main", "m.txt"); got != "a\nmine\nlater\none\n2\n3\n4\n5\n6\nseven\n" {
		t.Fatalf("main after the next commit (%+v): %q", res, got)
	}
	f, err := d.st.FS("main")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := f.Exists("n.txt"); ok || err != nil {
		t.Fatalf("main's n.txt after the next commit: %v, %v", ok, err)
	}
}

// failSwitch commits Workspace id through a switch that fails at the
// host path: the commit lands, the Workspace stays on its old view.
func failSwitch(t *testing.T, d *testDaemon, id string) {
	t.Helper()
	clear := failAt(t, sessions.FailpointHostPath, 1)
	defer clear()
	if res, err := d.Commit(id, api.CommitRequest{}); !errors.Is(err, errInjected) {
		t.Fatalf("the commit through a failing switch: %+v, %v", res, err)
	}
}

// TestRebaseFailingHalfWay: a conflicting commit's rebase fails after
// some of its changes to the upperdir, or at the switch to the head's
// view (at the host path, or in the namespace). The Workspace is shown
// again as it was before the commit: its old lease, the versions it
// wrote, no marker blocks nor the head's merged text; and a commit again
// meets the same conflict. It kept what the rebase had rewritten so far.
func TestRebaseFailingHalfWay(t *testing.T) {
	for _, fp := range []struct {
		name string
		nth  int
	}{{sessions.FailpointRebaseStep, 3}, {sessions.FailpointHostPath, 1}, {sessions.FailpointNamespace, 1}} {
		t.Run(fp.name, func(t *testing.T) {
			d := startDaemon(t, map[string]string{"a.txt": "a\n", "m.txt": "1\n2\n3\n4\n5\n6\n7\n", "u.txt": "u\n"},
				sessions.Config{Volume: sessions.VolumeOff})
			a, b := d.create(t, "main"), d.create(t, "main")
			d.sh(t, a.ID, "echo A > a.txt && sed -i 1s/1/one/ m.txt")
			d.sh(t, b.ID, "echo B > a.txt && sed -i 7s/7/seven/ m.txt && echo mine > b.txt && : >> u.txt")
			const read = "cat a.txt m.txt b.txt u.txt"
			before := d.sh(t, b.ID, read)
			d.commit(t, a.ID, api.StatusCommitted)
			clear := failAt(t, fp.name, fp.nth)
			if res, err := d.Commit(b.ID, api.CommitRequest{}); !errors.Is(err, errInjected) {
				t.Fatalf("B's commit through a failing rebase: %+v, %v", res, err)
			}
			clear()
			if got := d.sh(t, b.ID, read); got != before {
				t.Fatalf("after the failed rebase B reads %q; before it, %q", got, before)
			}
			checkOnOldView(t, d, b, []string{"a.txt", "b.txt", "later.txt", "m.txt"})
			res := d.commit(t, b.ID, api.StatusConflict)
			if !slices.Equal(res.Markers, []string{"a.txt"}) || !slices.Equal(res.Merged, []string{"m.txt"}) {
				t.Fatalf("B's commit again: %+v", res)
			}
		})
	}
}

// checkOnOldView checks that Workspace w, after a switch failed, is
// still on w.Lease and shows the same view to its commands and at its
// host path, where what a command writes now is pending beside what
// was: want lists the pending paths after that write (later.txt).
func checkOnOldView(t *testing.T, d *testDaemon, w api.Workspace, want []string) {
	t.Helper()
	d.sh(t, w.ID, "echo later > later.txt")
	in, err := d.Inspect(w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if in.Lease != w.Lease || !slices.Equal(in.Pending, want) {
		t.Errorf("after the failed switch: lease %.12s (was %.12s), pending %v, want %v", in.Lease, w.Lease, in.Pending, want)
	}
	data, err := os.ReadFile(filepath.Join(in.HostPath, "later.txt"))
	if string(data) != "later\n" {
		t.Errorf("the host path's later.txt: %q, %v", data, err)
	}
}

// crashEnv makes the test binary run crashingDaemonMain, which dies at
// the failpoint its value names: "name:n", at the nth time it is reached.
const crashEnv = "LAYERFS_TEST_CRASH_AT"

// crashingDaemonMain serves a daemon on the Store, state directory and
// socket args name, with its Workspaces' directories on the state
// directory (--volume off), and kills itself with SIGKILL at the
// failpoint at names: a crash there, mounts and all left as they are.
func crashingDaemonMain(at string, args []string) int {
	name, nth, _ := strings.Cut(at, ":")
	n, err := strconv.Atoi(nth)
	if err != nil || len(args) != 3 {
		fmt.Fprintf(os.Stderr, "crashing daemon: %s=%q, args %q\n", crashEnv, at, args)
		return 2
	}
	var reached atomic.Int32
	sessions.SetFailpointForTest(name, func() error {
		if int(reached.Add(1)) == n {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		return nil
	})
	st, err := layerfs.Open(args[0], layerfs.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	l, err := sessions.Listen(args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	d, err := sessions.Start(sessions.Config{Store: st.Backend(), StateDir: args[1], Volume: sessions.VolumeOff})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err = d.Serve(ctx, l)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// startCrashingDaemon runs crashingDaemonMain as startDaemonProc runs
// layerfs daemon.
func startCrashingDaemon(t *testing.T, storePath, stateDir, at string) *daemonProc {
	t.Helper()
	socket := filepath.Join(stateDir+".sock.d", "daemon.sock")
	cmd := exec.Command(os.Args[0], storePath, stateDir, socket)
	cmd.Env = append(os.Environ(), crashEnv+"="+at)
	return runDaemonProc(t, cmd, storePath, stateDir, socket)
}

// TestRebaseCrash kills the daemon (SIGKILL) while a conflicting commit
// rebases the Workspace onto the head it met: before each change to the
// upperdir, and once all are made, before the rewritten upperdir is
// renamed to the next generation. The restarted daemon brings the
// Workspace back wholly before the rebase — its old lease, the versions
// it wrote, and a commit again meets the same conflict — or wholly after
// it, never on the old lease with the head's merged text in the upperdir.
func TestRebaseCrash(t *testing.T) {
	points := []string{sessions.FailpointRebaseStep + ":1", sessions.FailpointRebaseStep + ":2",
		sessions.FailpointRebaseStep + ":3", sessions.FailpointRebaseRename + ":1"}
	for _, at := range points {
		t.Run(at, func(t *testing.T) {
			src := t.TempDir()
			writeTree(t, src, map[string]string{"a.txt": "a\n", "m.txt": "1\n2\n3\n4\n5\n6\n7\n", "u.txt": "u\n"})
			storePath := initStore(t, src)
			stateDir := filepath.Join(t.TempDir(), "state")
			p := startCrashingDaemon(t, storePath, stateDir, at)
			ctx := context.Background()
			var a, b api.Workspace
			var err error
			if a, err = p.client.Create(ctx, api.CreateRequest{}); err != nil {
				t.Fatal(err)
			}
			if b, err = p.client.Create(ctx, api.CreateRequest{}); err != nil {
				t.Fatal(err)
			}
			execOK(t, p.client, a.ID, "echo A > a.txt && sed -i 1s/1/one/ m.txt")
			// a.txt conflicts, m.txt merges, b.txt is B's alone and u.txt
			// is copied up unchanged.
			const script = "echo B > a.txt && sed -i 7s/7/seven/ m.txt && echo mine > b.txt && : >> u.txt"
			execOK(t, p.client, b.ID, script)
			const read = "cat a.txt m.txt b.txt u.txt"
			before := execOK(t, p.client, b.ID, read)
			if res, err := p.client.Commit(ctx, a.ID, api.CommitRequest{}); err != nil || res.Status != api.StatusCommitted {
				t.Fatalf("A's commit: %+v, %v", res, err)
			}
			res, err := p.client.Commit(ctx, b.ID, api.CommitRequest{})
			if err == nil {
				t.Fatalf("the daemon answered B's commit (%s) instead of dying at %s: the test proves nothing", res.Status, at)
			}
			<-p.exited

			p2 := startDaemonProc(t, storePath, stateDir, "--volume", "off")
			in, err := p2.client.Inspect(ctx, b.ID)
			if err != nil {
				t.Fatal(err)
			}
			got := execOK(t, p2.client, b.ID, read)
			switch in.Lease {
			case b.Lease:
				if got != before || strings.Join(in.Pending, " ") != "a.txt b.txt m.txt" {
					t.Fatalf("back on its old lease, B reads %q and has %v pending; before the rebase it read %q", got, in.Pending, before)
				}
				res, err := p2.client.Commit(ctx, b.ID, api.CommitRequest{})
				if err != nil || res.Status != api.StatusConflict || !slices.Equal(res.Merged, []string{"m.txt"}) {
					t.Fatalf("B's commit again: %+v, %v", res, err)
				}
			default:
				head, _ := p2.client.Inspect(ctx, a.ID)
				if in.Lease != head.Lease || !strings.Contains(got, "<<<<<<<") || !strings.Contains(got, "one\n2\n3\n4\n5\n6\nseven\n") {
					t.Fatalf("B is on %.12s (head %.12s) and reads %q", in.Lease, head.Lease, got)
				}
			}
		})
	}
}

// TestRestartAfterSwitchFailed: a commit lands, but the Workspace's switch
// to the new view fails, and it goes on with the old view, where
// commands write more: a new file, a committed file changed again,
// committed new files and directories removed, a file another commit had
// changed too changed again. The daemon restarts. The Workspace is then on the Commit
// that landed, with exactly what was written since pending — what was
// committed is not — its ignored files kept, and the next commit lands
// the rest. The restart followed the landed Commit with an empty
// upperdir: everything written after the commit was lost, without a word.
func TestRestartAfterSwitchFailed(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n", ".layerfsignore": "scratch/\n",
		"m.txt": "1\n2\n3\n4\n5\n6\n7\n", "q.txt": "1\n2\n3\n4\n5\n6\n7\n"}, sessions.Config{Volume: sessions.VolumeOff})
	other, w := d.create(t, "main"), d.create(t, "main")
	d.sh(t, other.ID, "sed -i 1s/1/one/ m.txt q.txt")
	d.commit(t, other.ID, api.StatusCommitted)
	d.sh(t, w.ID, "echo mine >> a.txt && echo two > b.txt && echo new > n.txt && mkdir -p nd/sub && echo z > nd/sub/z && sed -i 7s/7/seven/ m.txt q.txt && mkdir scratch && echo keep > scratch/k")
	clear := failAt(t, sessions.FailpointHostPath, 1)
	if res, err := d.Commit(w.ID, api.CommitRequest{}); !errors.Is(err, errInjected) {
		t.Fatalf("the commit through a failing switch: %+v, %v", res, err)
	}
	clear()
	landed := d.head(t)
	d.sh(t, w.ID, "echo later > later.txt && echo more >> b.txt && rm -r n.txt nd && sed -i 4s/4/four/ q.txt")
	const read = "cat a.txt b.txt later.txt m.txt q.txt scratch/k && test ! -e n.txt && test ! -e nd"
	if got, want := d.sh(t, w.ID, read), "a\nmine\ntwo\nmore\nlater\n1\n2\n3\n4\n5\n6\nseven\n1\n2\n3\nfour\n5\n6\nseven\nkeep\n"; got != want {
		t.Fatalf("before the restart the Workspace reads %q, want %q", got, want)
	}
	if err := d.Daemon.Close(); err != nil {
		t.Fatal(err)
	}
	d.restart(t, sessions.VolumeOff)
	in, err := d.Inspect(w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if in.Lease != landed || strings.Join(in.Pending, " ") != "b.txt later.txt n.txt nd q.txt" || in.Commits != 1 || len(in.Unsettled) != 0 {
		t.Fatalf("after the restart: lease %.12s (landed %.12s), pending %v, %d commits, unsettled %v", in.Lease, landed, in.Pending, in.Commits, in.Unsettled)
	}
	// The same, but for the other commit's change to m.txt and q.txt,
	// which now shows.
	const want = "a\nmine\ntwo\nmore\nlater\none\n2\n3\n4\n5\n6\nseven\none\n2\n3\nfour\n5\n6\nseven\nkeep\n"
	if got := d.sh(t, w.ID, read); got != want {
		t.Fatalf("after the restart the Workspace reads %q, want %q", got, want)
	}
	d.commit(t, w.ID, api.StatusCommitted)
	got := d.read(t, "main", "a.txt") + d.read(t, "main", "b.txt") + d.read(t, "main", "later.txt") + d.read(t, "main", "m.txt") + d.read(t, "main", "q.txt")
	if got+"keep\n" != want {
		t.Fatalf("main after the next commit: %q", got)
	}
	if main, err := d.st.FS("main"); err != nil {
		t.Fatal(err)
	} else if _, err := main.Read("n.txt"); err == nil {
		t.Fatal("main still has n.txt, removed since the first commit")
	} else if _, err := main.Read("nd/sub/z"); err == nil {
		t.Fatal("main still has nd/sub/z, removed since the first commit")
	}
}

// TestLateRemovalAfterFailedSwitch: after a commit's switch fails, the
// next generation's directories it had made are removed in the
// background, and the next view takes their names again. The remover,
// held back here as big removals before it hold it back on a busy
// machine, got to them by name once the Workspace had switched to that
// view: it removed the upperdir commands were writing to, and what they
// wrote after was gone at the next start.
func TestLateRemovalAfterFailedSwitch(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{Volume: sessions.VolumeOff})
	w := d.create(t, "main")
	d.sh(t, w.ID, "echo mine >> a.txt") // and the next view is made ahead
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	sessions.SetFailpointForTest(sessions.FailpointRemove, func() error { <-release; return nil })
	t.Cleanup(func() { // before the daemon's Close, which waits for the remover
		free()
		sessions.SetFailpointForTest(sessions.FailpointRemove, nil)
	})
	clear := failAt(t, sessions.FailpointHostPath, 1)
	if res, err := d.Commit(w.ID, api.CommitRequest{}); !errors.Is(err, errInjected) {
		t.Fatalf("the commit through a failing switch: %+v, %v", res, err)
	}
	clear()
	d.sh(t, w.ID, "echo later > later.txt") // the next view made ahead again
	d.commit(t, w.ID, api.StatusCommitted)
	d.sh(t, w.ID, "echo after > after.txt")
	free()
	if err := d.Daemon.Close(); err != nil { // once the remover is done
		t.Fatal(err)
	}
	d.restart(t, sessions.VolumeOff)
	in, err := d.Inspect(w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if in.Lease != d.head(t) || strings.Join(in.Pending, " ") != "after.txt" {
		t.Fatalf("after the restart: lease %.12s (head %.12s), pending %v", in.Lease, d.head(t), in.Pending)
	}
	if got := d.sh(t, w.ID, "cat a.txt later.txt after.txt"); got != "a\nmine\nlater\nafter\n" {
		t.Fatalf("the Workspace reads %q", got)
	}
	if trash, _ := filepath.Glob(filepath.Join(d.stateDir, "ws", w.ID, "trash-*")); len(trash) != 0 {
		t.Fatalf("left to remove: %v", trash)
	}
}

// TestRestoreFailing: at a start, restoring one Workspace fails. The
// daemon starts all the same and serves the others; the one it could
// not restore is listed in its health, with why, and requests for it
// say so; its directory, with its uncommitted changes, and its Lease
// are kept; and the next start restores it. One Workspace that could
// not be restored failed the whole start: none was usable.
func TestRestoreFailing(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{Volume: sessions.VolumeOff})
	a, b := d.create(t, "main"), d.create(t, "main")
	d.sh(t, a.ID, "echo A >> a.txt && echo new > n.txt")
	d.sh(t, b.ID, "echo B >> a.txt")
	failed, ok := a, b // resume goes by the directories' names
	if b.ID < a.ID {
		failed, ok = b, a
	}
	if err := d.Daemon.Close(); err != nil {
		t.Fatal(err)
	}
	clear := failAt(t, sessions.FailpointResume, 1)
	d.restart(t, sessions.VolumeOff)
	clear()
	h := d.Health()
	if !h.OK || h.Workspaces != 1 || len(h.Unrestored) != 1 || h.Unrestored[0].ID != failed.ID ||
		!strings.Contains(h.Unrestored[0].Error, errInjected.Error()) || h.Unrestored[0].Dir != filepath.Join(d.stateDir, "ws", failed.ID) {
		t.Fatalf("health after the start: %+v", h)
	}
	if _, err := d.Inspect(failed.ID); !errors.Is(err, sessions.ErrNotFound) || !strings.Contains(err.Error(), "could not restore") ||
		!strings.Contains(err.Error(), errInjected.Error()) {
		t.Fatalf("inspect of the Workspace not restored: %v", err)
	}
	pending := map[string][]string{a.ID: {"a.txt", "n.txt"}, b.ID: {"a.txt"}}
	in, err := d.Inspect(ok.ID)
	if err != nil || !slices.Equal(in.Pending, pending[ok.ID]) {
		t.Fatalf("the other Workspace: %+v, %v", in, err)
	}
	reads := map[string]string{a.ID: "a\nA\n", b.ID: "a\nB\n"}
	if got := d.sh(t, ok.ID, "cat a.txt"); got != reads[ok.ID] {
		t.Fatalf("the other Workspace reads %q, want %q", got, reads[ok.ID])
	}
	if kept, _ := filepath.Glob(filepath.Join(d.stateDir, "ws", failed.ID, "upper-*", "a.txt")); len(kept) != 1 {
		t.Fatalf("the upperdir of the Workspace not restored: %v", kept)
	}
	leases, err := d.st.Backend().Leases()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(leases, func(l store.Lease) bool { return l.ID == failed.ID && l.Commit.String() == failed.Lease }) {
		t.Fatalf("the Lease of the Workspace not restored is gone: %+v", leases)
	}
	if err := d.Daemon.Close(); err != nil {
		t.Fatal(err)
	}
	d.restart(t, sessions.VolumeOff)
	if h := d.Health(); h.Workspaces != 2 || len(h.Unrestored) != 0 {
		t.Fatalf("health after the next start: %+v", h)
	}
	in, err = d.Inspect(failed.ID)
	if err != nil || !slices.Equal(in.Pending, pending[failed.ID]) {
		t.Fatalf("the Workspace restored at the next start: %+v, %v", in, err)
	}
	if got := d.sh(t, failed.ID, "cat a.txt"); got != reads[failed.ID] {
		t.Fatalf("it reads %q, want %q", got, reads[failed.ID])
	}
}

// TestEndUnrestored: a Workspace the daemon could not restore at its
// start can be given up through the API. An end without discard is
// refused, as for any Workspace with changes, and says discard removes it
// for good; with discard it goes: its Lease, its directory, its entry in
// the health. Before, it answered 404 to either: only fixing the cause
// and restarting got rid of it.
func TestEndUnrestored(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{Volume: sessions.VolumeOff})
	ws := d.create(t, "main")
	d.sh(t, ws.ID, "echo A >> a.txt")
	if err := d.Daemon.Close(); err != nil {
		t.Fatal(err)
	}
	clear := failAt(t, sessions.FailpointResume, 1)
	d.restart(t, sessions.VolumeOff)
	clear()
	dir := filepath.Join(d.stateDir, "ws", ws.ID)
	end := func(query string) (int, api.Error) {
		rec := httptest.NewRecorder()
		d.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodDelete, "/workspaces/"+ws.ID+query, nil))
		var body api.Error
		json.Unmarshal(rec.Body.Bytes(), &body)
		return rec.Code, body
	}
	if code, body := end(""); code != http.StatusConflict || body.Code != api.CodeDirty ||
		!strings.Contains(body.Error, "could not restore") || !strings.Contains(body.Error, "discard") {
		t.Fatalf("end without discard: %d %+v", code, body)
	}
	if h := d.Health(); len(h.Unrestored) != 1 {
		t.Fatalf("health after the refused end: %+v", h)
	}
	if kept, _ := filepath.Glob(filepath.Join(dir, "upper-*", "a.txt")); len(kept) != 1 {
		t.Fatalf("the refused end touched the upperdir: %v", kept)
	}
	if code, body := end("?discard=1"); code != http.StatusOK {
		t.Fatalf("end with discard: %d %+v", code, body)
	}
	if h := d.Health(); len(h.Unrestored) != 0 || h.Workspaces != 0 {
		t.Fatalf("health after the end: %+v", h)
	}
	leases, err := d.st.Backend().Leases()
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(leases, func(l store.Lease) bool { return l.ID == ws.ID }) {
		t.Fatalf("its Lease is still there: %+v", leases)
	}
	if _, err := d.Inspect(ws.ID); !errors.Is(err, sessions.ErrNotFound) || strings.Contains(err.Error(), "could not restore") {
		t.Fatalf("inspect after the end: %v", err)
	}
	if code, body := end("?discard=1"); code != http.StatusNotFound {
		t.Fatalf("a second end: %d %+v", code, body)
	}
	if err := d.Daemon.Close(); err != nil { // waits for the removal
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("its directory: %v", err)
	}
	d.restart(t, sessions.VolumeOff)
	if h := d.Health(); h.Workspaces != 0 || len(h.Unrestored) != 0 {
		t.Fatalf("health after the next start: %+v", h)
	}
}
