package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/layerfs/layerfs"
	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/extents"
	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/publish"
	"github.com/layerfs/layerfs/sessions"
	"github.com/layerfs/layerfs/store"
	"golang.org/x/sys/unix"
)

// testDaemon is an in-process daemon over a fresh Store initialized from
// files; it is closed (everything unmounted) when the test ends.
type testDaemon struct {
	*sessions.Daemon
	st       *layerfs.Store
	stateDir string
}

// restart starts a new daemon on d's Store and state directory, with
// volume (sessions.VolumeOff, or "" for the default), in place of the one
// closed before; the test's cleanup closes it.
func (d *testDaemon) restart(t *testing.T, volume string) {
	t.Helper()
	d2, err := sessions.Start(sessions.Config{Store: d.st.Backend(), StateDir: d.stateDir, Self: layerfsBin, Volume: volume})
	if err != nil {
		t.Fatal(err)
	}
	d.Daemon = d2
}

func startDaemon(t *testing.T, files map[string]string, cfg sessions.Config) *testDaemon {
	t.Helper()
	src := filepath.Join(t.TempDir(), "src")
	for p, data := range files {
		full := filepath.Join(src, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(src, 0o755)
	return startDaemonFrom(t, src, cfg)
}

func (d *testDaemon) create(t *testing.T, branch string) api.Workspace {
	t.Helper()
	w, err := d.Create(api.CreateRequest{Branch: branch})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// sh runs a shell command in a Workspace and returns its stdout; a
// non-zero exit fails the test.
func (d *testDaemon) sh(t *testing.T, id, script string) string {
	t.Helper()
	res, err := d.Exec(context.Background(), id, api.ExecRequest{Argv: []string{"sh", "-c", script}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("sh -c %q: exit %d\n%s%s", script, res.ExitCode, res.Stdout, res.Stderr)
	}
	return string(res.StdoutBytes())
}

func (d *testDaemon) commit(t *testing.T, id string, want string) api.CommitResult {
	t.Helper()
	res, err := d.Commit(id, api.CommitRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != want {
		t.Fatalf("commit %s: %s %v, want %s", id, res.Status, res.Paths, want)
	}
	return res
}

func (d *testDaemon) read(t *testing.T, ref, path string) string {
	t.Helper()
	f, err := d.st.FS(ref)
	if err != nil {
		t.Fatal(err)
	}
	data, err := f.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestWorkspaceIsolation(t *testing.T) {
	d := startDaemon(t, map[string]string{"README": "hi\n"}, sessions.Config{})
	a, b := d.create(t, "main"), d.create(t, "main")
	d.sh(t, a.ID, "echo secret > marker")
	if out := d.sh(t, b.ID, "ls"); strings.Contains(out, "marker") {
		t.Fatal("B sees A's uncommitted marker")
	}
	if _, err := os.Stat(filepath.Join(b.HostPath, "marker")); err == nil {
		t.Fatal("B's host path shows A's marker")
	}
	if ok, _ := d.st.Backend().Branch("main"); ok.Head.String() != a.Lease {
		t.Fatal("the branch moved before A committed")
	}
	res := d.commit(t, a.ID, api.StatusCommitted)
	if out := d.sh(t, b.ID, "ls"); strings.Contains(out, "marker") {
		t.Fatal("a Workspace leased before A's commit sees it")
	}
	leases, err := d.st.Backend().Leases()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases {
		if want := map[string]string{a.ID: res.Commit, b.ID: a.Lease}[l.ID]; l.Commit.String() != want {
			t.Errorf("lease %s on %s, want %s", l.ID, l.Commit.Short(), want)
		}
	}
	c := d.create(t, "main")
	if out := d.sh(t, c.ID, "cat marker"); out != "secret\n" {
		t.Fatalf("a new Workspace must see A's commit: %q", out)
	}
	if out := d.sh(t, a.ID, "cat marker; pwd"); out != "secret\n"+api.DefaultPath+"\n" {
		t.Fatalf("A follows its commit: %q", out)
	}
}

func TestWorkspaceCommitsMerge(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"}, sessions.Config{})
	a, b := d.create(t, "main"), d.create(t, "main")
	d.sh(t, a.ID, "echo A >> a.txt")
	d.sh(t, b.ID, "echo B >> b.txt")
	d.commit(t, a.ID, api.StatusCommitted)
	d.commit(t, b.ID, api.StatusCommitted)
	if got := d.read(t, "main", "a.txt") + d.read(t, "main", "b.txt"); got != "a\nA\nb\nB\n" {
		t.Fatalf("head holds %q", got)
	}
}

func TestWorkspaceSameFileConflict(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{})
	a, b := d.create(t, "main"), d.create(t, "main")
	d.sh(t, a.ID, "echo A > a.txt")
	d.sh(t, b.ID, "echo B > a.txt")
	d.commit(t, a.ID, api.StatusCommitted)
	res := d.commit(t, b.ID, api.StatusConflict)
	if len(res.Paths) != 1 || res.Paths[0] != "a.txt" {
		t.Fatalf("conflict paths %v", res.Paths)
	}
	// The refused Workspace keeps its change, in marker blocks against head.
	if out := d.sh(t, b.ID, "cat a.txt"); !strings.HasPrefix(out, "<<<<<<< ours\nB\n") || !strings.Contains(out, "=======\nA\n>>>>>>> head ") {
		t.Fatalf("the refused Workspace's a.txt: %q", out)
	}
	if got := d.read(t, "main", "a.txt"); got != "A\n" {
		t.Fatalf("head: %q", got)
	}
}

func TestWorkspaceEndDiscardCap(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{MaxWorkspaces: 2})
	a, b := d.create(t, "main"), d.create(t, "main")
	if _, err := d.Create(api.CreateRequest{}); err == nil || !strings.Contains(err.Error(), "2 live Workspaces") {
		t.Fatalf("third Workspace over a cap of 2: %v", err)
	}
	d.sh(t, a.ID, "echo x > new.txt")
	if err := d.End(a.ID, false); err == nil || !strings.Contains(err.Error(), "new.txt") {
		t.Fatalf("ending a dirty Workspace: %v", err)
	}
	if _, err := d.Discard(a.ID, false); err != nil {
		t.Fatal(err)
	}
	if out := d.sh(t, a.ID, "ls"); strings.Contains(out, "new.txt") {
		t.Fatal("discard kept the change")
	}
	if err := d.End(a.ID, false); err != nil {
		t.Fatal(err)
	}
	d.sh(t, b.ID, "echo y > other.txt")
	if err := d.End(b.ID, true); err != nil {
		t.Fatal(err)
	}
	if ls, _ := d.st.Backend().Leases(); len(ls) != 0 {
		t.Fatalf("leases left: %v", ls)
	}
	if _, err := d.Exec(context.Background(), a.ID, api.ExecRequest{Argv: []string{"true"}}, nil); err == nil {
		t.Fatal("exec in an ended Workspace")
	}
}

// TestDaemonRestartKeepsDirtyWorkspaces: Close (as on SIGTERM) and Start
// again bring Workspaces back with their uncommitted changes.
func TestDaemonRestartKeepsDirtyWorkspaces(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{})
	var ids []string
	for i := 0; i < 3; i++ {
		w := d.create(t, "main")
		d.sh(t, w.ID, "echo dirty > f"+string(rune('0'+i)))
		ids = append(ids, w.ID)
	}
	if err := d.Daemon.Close(); err != nil {
		t.Fatal(err)
	}
	if left := strings.Join(mountsUnder(d.stateDir), "\n"); left != "" {
		t.Fatalf("mounts left after Close:\n%s", left)
	}
	// What a crash leaves where replaced views wait for their unmount.
	retired := filepath.Join(d.stateDir, "mnt", ".retired")
	if err := os.MkdirAll(filepath.Join(retired, "123"), 0o700); err != nil {
		t.Fatal(err)
	}
	d.restart(t, sessions.VolumeAuto)
	if _, err := os.Stat(filepath.Join(retired, "123")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after restart, %s still holds what a crash left: %v", retired, err)
	}
	for i, id := range ids {
		if out := d.sh(t, id, "cat f"+string(rune('0'+i))); out != "dirty\n" {
			t.Fatalf("%s after restart: %q", id, out)
		}
		d.commit(t, id, api.StatusCommitted)
	}
	if got := d.read(t, "main", "f2"); got != "dirty\n" {
		t.Fatalf("committed after restart: %q", got)
	}
}

// TestRestartReadsCopiedUpFiles: files a Workspace changed before a
// restart (copied up from the Store's FUSE mount) read as they were after
// it. overlayfs had recorded, on each, a file handle of the lower inode it
// was copied from, which names a FUSE node id: the restarted daemon's new
// FUSE mount gives those ids to other nodes, and a file whose handle now
// named a directory read "Stale file handle" (about one run in three
// here). The restart now removes those handles from the upperdir.
func TestRestartReadsCopiedUpFiles(t *testing.T) {
	files := map[string]string{}
	for _, p := range []string{"a.txt", "b.txt", "d/c.txt", "d/e/f.txt", "g/h.txt"} {
		files[p] = p + "\n"
	}
	d := startDaemon(t, files, sessions.Config{Volume: sessions.VolumeOff})
	w := d.create(t, "main")
	d.sh(t, w.ID, "for f in a.txt b.txt d/c.txt d/e/f.txt g/h.txt; do echo more >> $f; done; chmod 600 g/h.txt")
	const read = "cat a.txt b.txt d/c.txt d/e/f.txt g/h.txt"
	want := d.sh(t, w.ID, read)
	for round := 0; round < 3; round++ {
		if err := d.Daemon.Close(); err != nil {
			t.Fatal(err)
		}
		d.restart(t, sessions.VolumeOff)
		if got := d.sh(t, w.ID, read); got != want {
			t.Fatalf("after restart %d: %q, want %q", round, got, want)
		}
		origins, err := filesWithOrigin(filepath.Join(d.stateDir, "ws", w.ID))
		if err != nil || len(origins) > 0 {
			t.Fatalf("after restart %d, files still naming the old FUSE mount's inodes: %v, %v", round, origins, err)
		}
	}
}

// filesWithOrigin lists the files below dir that carry an overlayfs origin
// file handle.
func filesWithOrigin(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		if _, err := unix.Lgetxattr(p, "trusted.overlay.origin", nil); err == nil {
			out = append(out, p)
		}
		return nil
	})
	return out, err
}

// An ended Workspace's directory, should the daemon stop before removing
// it, is removed by the next one and never restored.
func TestDaemonRestartRemovesEndedWorkspaces(t *testing.T) {
	// No volume: its directories would be mounted over at the restart,
	// and those written below hidden from it.
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{Volume: sessions.VolumeOff})
	w := d.create(t, "main")
	d.sh(t, w.ID, "echo x > f")
	d.commit(t, w.ID, api.StatusCommitted)
	if err := d.End(w.ID, false); err != nil {
		t.Fatal(err)
	}
	if err := d.Daemon.Close(); err != nil {
		t.Fatal(err)
	}
	// As if the removal had not happened before the daemon stopped — and
	// with a record beside the marker.
	ended := filepath.Join(d.stateDir, "ws", w.ID)
	if err := os.MkdirAll(filepath.Join(ended, "upper-9"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ended, "ended"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	head, err := d.st.Backend().Branch("main")
	if err != nil {
		t.Fatal(err)
	}
	rec := fmt.Sprintf(`{"id": %q, "branch": "main", "lease": %q, "path": "/workspace", "gen": 9}`, w.ID, head.Head.String())
	if err := os.WriteFile(filepath.Join(ended, "state.json"), []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	d.restart(t, sessions.VolumeOff)
	if _, err := d.Inspect(w.ID); err == nil {
		t.Fatalf("ended Workspace %s restored", w.ID)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(ended); errors.Is(err, fs.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ended Workspace's directory %s not removed", ended)
		}
	}
}

// TestDaemonRestartReleasesOrphanLeases: Leases a daemon of this state
// directory took for Workspaces it kept no record of (a crash between a
// create's Lease and its record, or an end's record and its release) are
// released by the next one; its restored Workspaces' Leases, those of a
// Workspace directory whose record it could not read, and other state
// directories' — another path, or the same path in another container —
// stay.
func TestDaemonRestartReleasesOrphanLeases(t *testing.T) {
	// No volume: the directory made below must be seen at the restart.
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{Volume: sessions.VolumeOff})
	kept := d.create(t, "main")
	d.sh(t, kept.ID, "echo dirty > f")
	if err := d.Daemon.Close(); err != nil {
		t.Fatal(err)
	}
	s := d.st.Backend()
	head, err := s.Branch("main")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := filepath.EvalSymlinks(d.stateDir)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := os.ReadFile(filepath.Join(dir, "instance"))
	if err != nil {
		t.Fatal(err)
	}
	ours := dir + "@" + strings.TrimSpace(string(inst))
	host, _ := os.Hostname()
	for id, holder := range map[string]string{
		"ws-orphan":       host + ":99999:" + ours,
		"ws-another":      host + ":99999:" + dir + "-another@" + strings.TrimSpace(string(inst)),
		"ws-another-inst": host + ":99999:" + dir + "@0123456789abcdef", // the same path in another container
		"ws-unreadable":   host + ":99999:" + ours,                      // a directory whose record is unreadable
	} {
		if err := s.SetLease(id, "main", holder, head.Head); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(d.stateDir, "ws", "ws-unreadable"), 0o700); err != nil {
		t.Fatal(err)
	}
	// A directory with no record at all is a create a crash cut short:
	// removed, its Lease released (sessions' unit tests).
	if err := os.WriteFile(filepath.Join(d.stateDir, "ws", "ws-unreadable", "state.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	d.restart(t, sessions.VolumeOff)
	leases, err := s.Leases()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, l := range leases {
		ids = append(ids, l.ID)
	}
	want := []string{"ws-another", "ws-another-inst", "ws-unreadable", kept.ID}
	slices.Sort(ids)
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Errorf("leases after restart: %v, want %v", ids, want)
	}
}

// TestConcurrentRequestsAndEnd: requests that got hold of a Workspace
// while a slow commit held it, and waited behind an end, find it ended
// (ErrNotFound): none of them may use what the end took down. A commit
// that did so dereferenced the stopped holder on a goroutine of its own
// and took the daemon down.
func TestConcurrentRequestsAndEnd(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{})
	for i := 0; i < 6; i++ {
		w := d.create(t, "main")
		// A new 8 MiB file: its commit holds the Workspace for a while.
		d.sh(t, w.ID, fmt.Sprintf("head -c 8388608 /dev/urandom > big%d.bin", i))
		var wg sync.WaitGroup
		run := func(op func() error) *error {
			err := new(error)
			wg.Add(1)
			go func() { defer wg.Done(); *err = op() }()
			return err
		}
		first := run(func() error { _, err := d.Commit(w.ID, api.CommitRequest{}); return err })
		time.Sleep(20 * time.Millisecond) // the commit is capturing
		end := run(func() error { return d.End(w.ID, true) })
		time.Sleep(2 * time.Millisecond) // the end waits for the commit; these for both
		others := []*error{
			run(func() error { _, err := d.Commit(w.ID, api.CommitRequest{}); return err }),
			run(func() error { _, err := d.Discard(w.ID, false); return err }),
			run(func() error { _, err := d.Inspect(w.ID); return err }),
			run(func() error { return d.End(w.ID, true) }),
		}
		wg.Wait()
		if *first != nil {
			t.Fatalf("round %d: the first commit: %v", i, *first)
		}
		ends := 0
		for j, err := range append([]*error{end}, others...) {
			switch {
			case *err == nil && (j == 0 || j == 4):
				ends++
			case *err != nil && !errors.Is(*err, sessions.ErrNotFound):
				t.Errorf("round %d, request %d: %v", i, j, *err)
			}
		}
		if ends != 1 {
			t.Fatalf("round %d: %d ends succeeded, want 1", i, ends)
		}
	}
}

// TestCommitOnFullStateDir: a commit that fills the disk the Workspace
// records live on still records the new lease (the record is overwritten
// in place when no new file fits), so a restart brings the Workspace back
// on the Commit that landed, with what was changed after it, not on its
// old lease with the committed changes pending again.
func TestCommitOnFullStateDir(t *testing.T) {
	stateDir := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", stateDir, "tmpfs", 0, "size=24m"); err != nil {
		t.Skipf("tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(stateDir, unix.MNT_DETACH) })
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{StateDir: stateDir})
	w := d.create(t, "main")
	// Fill the state directory's tmpfs from the Workspace: its upperdir
	// is there. The space comes back once the commit's old upperdir is
	// removed, in the background: the write after it may have to wait.
	d.exec(t, w.ID, nil, "sh", "-c", "echo keep > keep.txt; head -c 30000000 /dev/zero > fill.bin; true")
	res := d.commit(t, w.ID, api.StatusCommitted)
	if r := d.exec(t, w.ID, nil, "sh", "-c", "rm fill.bin && for i in $(seq 50); do echo after 2>/dev/null > after.txt && exit 0; sleep 0.1; done; exit 1"); r.ExitCode != 0 {
		t.Fatalf("after the commit: %s", r.Stderr)
	}
	if err := d.Daemon.Close(); err != nil {
		t.Fatal(err)
	}
	d.restart(t, sessions.VolumeAuto)
	got, err := d.Inspect(w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Lease != res.Commit || got.Commits != 1 {
		t.Fatalf("after restart: lease %.12s, %d commits; want the landed %.12s", got.Lease, got.Commits, res.Commit)
	}
	if strings.Join(got.Pending, " ") != "after.txt fill.bin" {
		t.Fatalf("pending after restart: %v; want after.txt and the removal of fill.bin", got.Pending)
	}
}

// TestRestartRemovesOldGenerations: the upperdir of a generation before
// the current one, whose removal a crash cut short, is removed at the
// next start; one moved aside as unnamed writes is kept.
func TestRestartRemovesOldGenerations(t *testing.T) {
	// No volume: closed, the daemon leaves its Workspaces' directories
	// where the test can reach them.
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{Volume: sessions.VolumeOff})
	w := d.create(t, "main")
	d.sh(t, w.ID, "echo b > b.txt")
	d.commit(t, w.ID, api.StatusCommitted)
	if err := d.Daemon.Close(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(d.stateDir, "ws", w.ID)
	old, aside := filepath.Join(dir, "upper-0"), filepath.Join(dir, "upper-0.kept-1")
	for _, p := range []string{old, aside} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "b.txt"), []byte("b\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d.restart(t, sessions.VolumeOff)
	deadline := time.Now().Add(5 * time.Second)
	for _, err := os.Stat(old); err == nil; _, err = os.Stat(old) {
		if time.Now().After(deadline) {
			t.Fatalf("%s still there after the restart", old)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(aside, "b.txt")); err != nil {
		t.Fatalf("the directory moved aside went: %v", err)
	}
	if got := d.sh(t, w.ID, "cat b.txt"); got != "b\n" {
		t.Fatalf("after the restart: %q", got)
	}
}

// TestStateDirOfAnotherStore: a state directory refuses a Store other
// than the one whose Workspaces it holds, before writing anything into
// either.
func TestStateDirOfAnotherStore(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{})
	w := d.create(t, "main")
	d.sh(t, w.ID, "echo dirty > b.txt")
	if err := d.Daemon.Close(); err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	writeTree(t, src, map[string]string{"other.txt": "other\n"})
	other, err := layerfs.Open(initStore(t, src), layerfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	d2, err := sessions.Start(sessions.Config{Store: other.Backend(), StateDir: d.stateDir, Self: layerfsBin})
	if err == nil {
		d2.Close()
		t.Fatal("a state directory started with another Store")
	}
	if !errors.Is(err, sessions.ErrOtherStore) || !strings.Contains(err.Error(), d.st.Backend().Path()) {
		t.Fatalf("another Store: %v", err)
	}
	if leases, err := other.Backend().Leases(); err != nil || len(leases) != 0 {
		t.Fatalf("the other Store's leases: %v %v", leases, err)
	}
	d.restart(t, sessions.VolumeAuto)
	if got := d.sh(t, w.ID, "cat b.txt"); got != "dirty\n" {
		t.Fatalf("the Workspace after all that: %q", got)
	}
}

// TestDaemonNeedsAWritableStore: a daemon on a Store opened read-only is
// refused at start, not at every create.
func TestDaemonNeedsAWritableStore(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, map[string]string{"a.txt": "a\n"})
	st, err := layerfs.Open(initStore(t, src), layerfs.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	d, err := sessions.Start(sessions.Config{Store: st.Backend(), StateDir: filepath.Join(t.TempDir(), "state"), Self: layerfsBin})
	if err == nil {
		d.Close()
		t.Fatal("a daemon started on a read-only Store")
	}
	if !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("read-only Store: %v", err)
	}
}

// TestHealthSeesTheFUSEMountGone: the daemon's FUSE mount unmounted from
// outside makes it unhealthy, saying so.
func TestHealthSeesTheFUSEMountGone(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{})
	if h := d.Health(); !h.OK || h.Problem != "" {
		t.Fatalf("health: %+v", h)
	}
	if err := unix.Unmount(filepath.Join(d.stateDir, "lower"), unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	if h := d.Health(); h.OK || !strings.Contains(h.Problem, "FUSE mount") {
		t.Fatalf("health with the FUSE mount gone: %+v", h)
	}
	rec := httptest.NewRecorder()
	d.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/health", nil))
	var body struct {
		OK    bool   `json:"ok"`
		Code  string `json:"code"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != http.StatusServiceUnavailable ||
		body.OK || body.Code != api.CodeUnhealthy || !strings.Contains(body.Error, "FUSE mount") {
		t.Fatalf("GET /health: %d %s (%v)", rec.Code, rec.Body, err)
	}
}

// TestRestartAfterCommitLanded: a crash between a commit's landing (whose
// transaction moves the Workspace's lease) and the save of its record is
// finished at the restart: the Workspace follows the Commit that landed,
// with nothing pending and its ignored files kept, instead of coming back
// with the committed changes pending again, to be committed twice.
func TestRestartAfterCommitLanded(t *testing.T) {
	d := startDaemon(t, map[string]string{"shared.txt": "base\n", ".layerfsignore": "scratch/\n"}, sessions.Config{Volume: sessions.VolumeOff})
	w := d.create(t, "main")
	d.sh(t, w.ID, "echo mine >> shared.txt; mkdir scratch; echo keep > scratch/k")
	if err := d.Daemon.Close(); err != nil {
		t.Fatal(err)
	}
	res := landAsBeforeACrash(t, d, w, "base\nmine\n")
	// Another writer after it.
	main, err := d.st.FS("main")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := main.Append("shared.txt", []byte("theirs\n"), layerfs.Call{}); err != nil {
		t.Fatal(err)
	}
	d.restart(t, sessions.VolumeOff)
	checkFollowed(t, d, w.ID, res)
	if k := d.sh(t, w.ID, "cat scratch/k"); k != "keep\n" {
		t.Fatalf("the ignored file: %q", k)
	}
	d.commit(t, w.ID, api.StatusUpToDate)
	if got := d.read(t, "main", "shared.txt"); got != "base\nmine\ntheirs\n" {
		t.Fatalf("main's shared.txt: %q", got)
	}
}

// TestRestartAfterCommitLandedSettles: a commit that settled a conflict
// (here a delete conflict, settled by writing a new version) and landed
// before a crash leaves nothing unsettled once the restart has followed
// it, as the commit itself would have: the record's list, saved before
// the commit, came back, and the path's next version was refused as
// still unsettled against a head that was the Workspace's own.
func TestRestartAfterCommitLandedSettles(t *testing.T) {
	d := startDaemon(t, map[string]string{"shared.txt": "base\n"}, sessions.Config{Volume: sessions.VolumeOff})
	w := d.create(t, "main")
	d.sh(t, w.ID, "rm shared.txt")
	main, err := d.st.FS("main")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := main.Append("shared.txt", []byte("theirs\n"), layerfs.Call{}); err != nil {
		t.Fatal(err)
	}
	d.commit(t, w.ID, api.StatusConflict)
	if got, err := d.Inspect(w.ID); err != nil || len(got.Unsettled) != 1 {
		t.Fatalf("after the conflict: unsettled %v, %v", got.Unsettled, err)
	}
	d.sh(t, w.ID, "echo resolved > shared.txt")
	w, err = d.Inspect(w.ID) // on the head the conflict met
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Daemon.Close(); err != nil {
		t.Fatal(err)
	}
	res := landAsBeforeACrash(t, d, w, "resolved\n")
	d.restart(t, sessions.VolumeOff)
	got, err := d.Inspect(w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Lease != res.Commit.String() || len(got.Pending) != 0 || len(got.Unsettled) != 0 {
		t.Fatalf("after the restart: lease %.12s (landed %s), pending %v, unsettled %v", got.Lease, res.Commit.Short(), got.Pending, got.Unsettled)
	}
	d.sh(t, w.ID, "rm shared.txt")
	d.commit(t, w.ID, api.StatusCommitted)
}

// landAsBeforeACrash lands shared.txt with content as w's commit would,
// moving w's lease in the Store in the same transaction, and leaves w's
// record as it was: what a crash between the landing and the record's
// save leaves. The daemon is closed.
func landAsBeforeACrash(t *testing.T, d *testDaemon, w api.Workspace, content string) *publish.Result {
	t.Helper()
	s := d.st.Backend()
	var holder string
	leases, _ := s.Leases()
	for _, l := range leases {
		if l.ID == w.ID {
			holder = l.Holder
		}
	}
	stage := s.NewStage()
	f, err := extents.WriteBytes(stage, []byte(content))
	if err != nil {
		t.Fatal(err)
	}
	cs := &publish.Changeset{Base: mustParse(t, w.Lease), Changes: []publish.Change{{Path: "shared.txt",
		Entry: &store.Entry{Type: store.TypeFile, Mode: 0o644, ID: f.ID, Size: f.Size, MTime: time.Now().UnixNano()}}}}
	res, err := publish.Publish(s, "main", cs, stage, publish.Meta{Origin: store.OriginSession + w.ID, Message: "landed",
		Landing: func(tx *store.RefTx, commit object.ID) error { return tx.SetLease(w.ID, "main", holder, commit) }})
	if err != nil || res.Status != publish.Committed {
		t.Fatalf("the landing: %+v %v", res, err)
	}
	return res
}

// TestRestartAfterCommitLandedRetried: a restart that fails to restore a
// Workspace before it has finished a commit that landed before a crash (here: the Workspace's own
// rules cannot be read) leaves the landing for the next start to see. The
// restart moved the Store's lease back to the record's before it
// followed the Commit, and the next start brought the Workspace back with
// the committed change pending again.
func TestRestartAfterCommitLandedRetried(t *testing.T) {
	d := startDaemon(t, map[string]string{"shared.txt": "base\n"}, sessions.Config{Volume: sessions.VolumeOff})
	w := d.create(t, "main")
	d.sh(t, w.ID, "echo mine >> shared.txt; echo '%include ../outside' > .layerfsignore")
	if err := d.Daemon.Close(); err != nil {
		t.Fatal(err)
	}
	res := landAsBeforeACrash(t, d, w, "base\nmine\n")
	// The daemon starts without it (see TestRestoreFailing).
	d.restart(t, sessions.VolumeOff)
	if h := d.Health(); len(h.Unrestored) != 1 || h.Unrestored[0].ID != w.ID {
		t.Fatalf("a restart with the Workspace's rules unreadable: %+v", h)
	}
	if err := d.Daemon.Close(); err != nil {
		t.Fatal(err)
	}
	checkNoMountsUnder(t, d.stateDir)
	checkNoThreadSees(t, d.stateDir)
	uppers, _ := filepath.Glob(filepath.Join(d.stateDir, "ws", w.ID, "upper-*", ".layerfsignore"))
	if len(uppers) != 1 {
		t.Fatalf("the Workspace's rule file in its upperdirs: %v", uppers)
	}
	if err := os.Remove(uppers[0]); err != nil {
		t.Fatal(err)
	}
	d.restart(t, sessions.VolumeOff)
	checkFollowed(t, d, w.ID, res)
}

// checkFollowed fails the test unless Workspace id, after a restart,
// follows the Commit res landed as its first commit, with nothing pending.
func checkFollowed(t *testing.T, d *testDaemon, id string, res *publish.Result) {
	t.Helper()
	got, err := d.Inspect(id)
	if err != nil {
		t.Fatal(err)
	}
	if got.Lease != res.Commit.String() || len(got.Pending) != 0 || got.Commits != 1 {
		t.Fatalf("after the restart: lease %.12s (landed %s), pending %v, %d commits", got.Lease, res.Commit.Short(), got.Pending, got.Commits)
	}
}

// checkNoThreadSees fails the test if a thread of this process is still,
// after a moment, in a mount namespace with a mount of dir's in it: a
// holder the daemon did not stop, whose copy of a Workspace's overlay
// keeps the Store's FUSE mount alive.
func checkNoThreadSees(t *testing.T, dir string) {
	t.Helper()
	var seen []string
	for try := 0; try < 100; try++ {
		seen = seen[:0]
		tasks, _ := filepath.Glob("/proc/self/task/*/mountinfo")
		for _, p := range tasks {
			if data, err := os.ReadFile(p); err == nil && strings.Contains(string(data), dir+"/lower") {
				seen = append(seen, filepath.Base(filepath.Dir(p)))
			}
		}
		if len(seen) == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("threads %v still see mounts of %s", seen, dir)
}

func mustParse(t *testing.T, hex string) object.ID {
	t.Helper()
	id, err := object.Parse(hex)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestCloseWaitsForCreates: a Close while creates are under way waits for
// them, and then unmounts their Workspaces too. It took its list of
// Workspaces without the ones still being made, which then mounted their
// overlays and kept their holders after Close had unmounted everything.
func TestCloseWaitsForCreates(t *testing.T) {
	for round := 0; round < 5; round++ {
		d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{Volume: sessions.VolumeOff})
		var wg sync.WaitGroup
		for i := 0; i < 6; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				path := "/w"
				if i%2 == 0 {
					path = api.DefaultPath // from the spare, as far as there is one
				}
				d.Create(api.CreateRequest{Path: path})
			}()
		}
		time.Sleep(time.Duration(round) * time.Millisecond)
		if err := d.Daemon.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		wg.Wait()
		checkNoMountsUnder(t, d.stateDir)
		checkNoThreadSees(t, d.stateDir)
	}
}

// TestCommitWhoseRecordCannotBeSaved: a commit whose new view is shown
// but whose record cannot be saved (here: the Workspace's directory made
// immutable; a full disk, where a longer record does not fit its blocks,
// or an I/O error the same) keeps the new view. It backed out instead:
// the Workspace went on naming the old generation and lease while the
// new view was shown, so the landed change read as pending again, what
// commands wrote next went to an upperdir queued for removal and was not
// seen as pending, and the commit answered an error though it had landed.
func TestCommitWhoseRecordCannotBeSaved(t *testing.T) {
	d := startDaemon(t, map[string]string{"shared.txt": "base\n"}, sessions.Config{Volume: sessions.VolumeOff})
	w := d.create(t, "main")
	d.sh(t, w.ID, "echo mine >> shared.txt") // and the next view is made ahead
	dir := filepath.Join(d.stateDir, "ws", w.ID)
	if err := setImmutable(dir, true); err != nil {
		t.Skipf("immutable directories: %v", err)
	}
	t.Cleanup(func() { setImmutable(dir, false) })
	res, err := d.Commit(w.ID, api.CommitRequest{})
	if err := setImmutable(dir, false); err != nil {
		t.Fatal(err)
	}
	if err != nil || res.Status != api.StatusCommitted {
		t.Errorf("the commit: %+v, %v", res, err)
	}
	d.sh(t, w.ID, "echo new > new.txt")
	got, err := d.Inspect(w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if head := d.read(t, "main", "shared.txt"); got.Lease != d.head(t) || strings.Join(got.Pending, " ") != "new.txt" || head != "base\nmine\n" {
		t.Fatalf("after the commit: lease %.12s (head %.12s), pending %v, main's shared.txt %q", got.Lease, d.head(t), got.Pending, head)
	}
	// The record still names generation 0, whose upperdir is gone: a
	// restart takes up generation 1's.
	if err := d.Daemon.Close(); err != nil {
		t.Fatal(err)
	}
	d.restart(t, sessions.VolumeOff)
	if got, err := d.Inspect(w.ID); err != nil || got.Lease != d.head(t) || strings.Join(got.Pending, " ") != "new.txt" {
		t.Fatalf("after a restart: %+v, %v", got, err)
	}
	d.commit(t, w.ID, api.StatusCommitted)
	if got, want := d.read(t, "main", "shared.txt")+d.read(t, "main", "new.txt"), "base\nmine\nnew\n"; got != want {
		t.Fatalf("main's shared.txt and new.txt: %q, want %q", got, want)
	}
}

// setImmutable sets or clears directory dir's immutable attribute
// (FS_IMMUTABLE_FL, linux/fs.h, which x/sys/unix does not name).
func setImmutable(dir string, on bool) error {
	const immutable = 0x10
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		return err
	}
	if on {
		flags |= immutable
	} else {
		flags &^= immutable
	}
	return unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags))
}

func (d *testDaemon) head(t *testing.T) string {
	t.Helper()
	b, err := d.st.Backend().Branch("main")
	if err != nil {
		t.Fatal(err)
	}
	return b.Head.String()
}

// TestCommitLandedButNotFollowed: a commit that landed but whose new view
// could not be mounted (here: its work directory on another filesystem
// than its upperdir) keeps the Store's lease on the Commit that landed,
// so that a restart finishes it (the Workspace follows the Commit,
// keeping its ignored files), as after a crash at that point. The lease
// went back to the old Commit, and the restart brought the Workspace back
// with the landed change pending again, to be committed twice.
func TestCommitLandedButNotFollowed(t *testing.T) {
	d := startDaemon(t, map[string]string{"shared.txt": "base\n", ".layerfsignore": "scratch/\n"}, sessions.Config{Volume: sessions.VolumeOff})
	w := d.create(t, "main")
	d.sh(t, w.ID, "echo mine >> shared.txt; mkdir scratch; echo keep > scratch/k")
	work := filepath.Join(d.stateDir, "ws", w.ID, "work-1")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", work, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(work, unix.MNT_DETACH) })
	if res, err := d.Commit(w.ID, api.CommitRequest{}); err == nil || !strings.Contains(err.Error(), "landed") {
		t.Fatalf("the commit whose view cannot be mounted: %+v, %v", res, err)
	}
	if got := d.read(t, "main", "shared.txt"); got != "base\nmine\n" {
		t.Fatalf("main's shared.txt: %q", got)
	}
	head := d.head(t)
	if err := d.Daemon.Close(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Unmount(work, 0); err != nil {
		t.Fatal(err)
	}
	d.restart(t, sessions.VolumeOff)
	got, err := d.Inspect(w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Lease != head || len(got.Pending) != 0 || got.Commits != 1 {
		t.Fatalf("after the restart: lease %.12s (head %.12s), pending %v, %d commits", got.Lease, head, got.Pending, got.Commits)
	}
	if k := d.sh(t, w.ID, "cat scratch/k"); k != "keep\n" {
		t.Fatalf("the ignored file: %q", k)
	}
}

// TestExecStartErrors: a start that fails says whose fault it was. An
// argument longer than the kernel passes (E2BIG) or one holding a NUL
// byte is the request's (bad_request); a directory, or a file without
// the execute bit, cannot be run (126). A start the machine refuses
// (EAGAIN, ENOMEM) is neither: an internal error.
func TestExecStartErrors(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n", "sub/b.txt": "b\n"}, sessions.Config{})
	w := d.create(t, "main")
	for _, c := range []struct {
		argv []string
		want error
	}{
		{[]string{"echo", strings.Repeat("x", 200<<10)}, sessions.ErrBadRequest},
		{[]string{"echo", "a\x00b"}, sessions.ErrBadRequest},
		{[]string{"./sub"}, sessions.ErrCannotRun},
		{[]string{"./a.txt"}, sessions.ErrCannotRun},
	} {
		_, err := d.Exec(context.Background(), w.ID, api.ExecRequest{Argv: c.argv}, nil)
		if !errors.Is(err, c.want) {
			t.Errorf("exec %.40q: %v, want %v", c.argv, err, c.want)
		}
	}
	if err := d.End(w.ID, false); err != nil {
		t.Fatal(err)
	}
}
