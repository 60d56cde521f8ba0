package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/layerfs/layerfs"
	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/sessions"
)

// TestWorkspaces256 creates 256 Workspaces of one base at once (the
// default cap), refuses a 257th, runs a command in each that writes a file
// of its own and lists the root, and ends them all. Then the daemon is
// back where it started: no Workspace overlay mounted, no lease, no holder
// namespace beyond those made ahead of need and their template, and about
// as many open files and OS threads as after a warm-up round of 32 (a leak
// would grow with the count; idle threads the Go runtime keeps do not).
func TestWorkspaces256(t *testing.T) {
	d := startDaemon(t, map[string]string{"README": "shared\n"}, sessions.Config{})
	fanOut(t, d, 32, nil)
	fds, threads := countFDs(t), countThreads(t)
	const n = sessions.DefaultMaxWorkspaces
	fanOut(t, d, n, func() {
		if _, err := d.Create(api.CreateRequest{}); err == nil || !strings.Contains(err.Error(), "256 live Workspaces") {
			t.Errorf("a 257th Workspace: %v", err)
		}
		if got := len(mountsUnder(d.stateDir + "/mnt")); got != n {
			t.Errorf("%d mounts under mnt/ with %d Workspaces", got, n)
		}
		if h := countHolders(t); h < n {
			t.Errorf("%d Workspace namespaces held with %d Workspaces", h, n)
		}
	})
	if left := mountsUnder(d.stateDir + "/mnt"); len(left) > 0 {
		t.Errorf("%d Workspace mounts left after all ended, first %s", len(left), left[0])
	}
	if ls, _ := d.st.Backend().Leases(); len(ls) != 0 {
		t.Errorf("%d leases left", len(ls))
	}
	h := countHolders(t)
	// The pool's holder, the spare's, and the template they are copies of.
	const kept = 3
	for deadline := time.Now().Add(2 * time.Second); h > kept && time.Now().Before(deadline); h = countHolders(t) {
		time.Sleep(20 * time.Millisecond) // holder threads exit as their goroutines end
	}
	if h > kept {
		t.Errorf("%d Workspace namespaces held after all ended; the daemon keeps %d", h, kept)
	}
	if got := countFDs(t); got > fds+8 {
		t.Errorf("%d open files after 256 Workspaces ended, %d after 32", got, fds)
	}
	if got := countThreads(t); got > threads+32 {
		t.Errorf("%d OS threads after 256 Workspaces ended, %d after 32", got, threads)
	}
}

// fanOut creates n Workspaces, 16 at a time; calls live (if set) while
// all n are live; then runs a command in each and ends it.
func fanOut(t *testing.T, d *testDaemon, n int, live func()) {
	t.Helper()
	ws := make([]api.Workspace, n)
	parallel(t, n, func(i int) error {
		w, err := d.Create(api.CreateRequest{})
		ws[i] = w
		return err
	})
	if t.Failed() {
		t.FailNow()
	}
	if live != nil {
		live()
	}
	parallel(t, n, func(i int) error {
		script := fmt.Sprintf("echo %d > mine && cat mine README && ls | wc -l", i)
		res, err := d.Exec(t.Context(), ws[i].ID, api.ExecRequest{Argv: []string{"sh", "-c", script}}, nil)
		if err == nil && res.Stdout != fmt.Sprintf("%d\nshared\n2\n", i) {
			err = fmt.Errorf("%s: %q (exit %d, %s)", ws[i].ID, res.Stdout, res.ExitCode, res.Stderr)
		}
		if err != nil {
			return err
		}
		return d.End(ws[i].ID, true)
	})
}

// parallel calls fn(0..n-1), 16 at a time, and reports every error.
func parallel(t *testing.T, n int, fn func(i int) error) {
	t.Helper()
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = fn(i)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Error(err)
	}
}

// countFDs counts this process's open files, leaving out the Store's
// (the database, its -wal and -shm): its pool of reader connections opens
// more as more queries run at once, up to a bound, which is no leak.
func countFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
		if !strings.HasSuffix(strings.TrimSuffix(strings.TrimSuffix(target, "-wal"), "-shm"), ".layerfs") {
			n++
		}
	}
	return n
}

func countThreads(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// countHolders counts the Workspace namespaces this process holds: the
// mount namespaces its threads are in, other than its own.
func countHolders(t *testing.T) int {
	self, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	ns := map[string]bool{}
	for _, task := range tasks {
		if l, err := os.Readlink("/proc/self/task/" + task.Name() + "/ns/mnt"); err == nil && l != self {
			ns[l] = true
		}
	}
	return len(ns)
}

// TestTwoDaemonsOneStore runs two daemon processes, each with its own
// state directory and FUSE mount, on one Store file. A commit from either
// is seen by Workspaces the other creates afterwards (not by one leased
// before it); disjoint commits from both land; the same file changed
// through both is a conflict for the second; and sixteen Workspaces, eight
// per daemon, committing at once all land.
func TestTwoDaemonsOneStore(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, map[string]string{"a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n"})
	storePath := initStore(t, src)
	p1 := startDaemonProc(t, storePath, filepath.Join(t.TempDir(), "state1"))
	p2 := startDaemonProc(t, storePath, filepath.Join(t.TempDir(), "state2"))
	ctx := context.Background()
	create := func(p *daemonProc) string {
		t.Helper()
		w, err := p.client.Create(ctx, api.CreateRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return w.ID
	}
	commit := func(p *daemonProc, id, want string) {
		t.Helper()
		res, err := p.client.Commit(ctx, id, api.CommitRequest{})
		if err != nil || res.Status != want {
			t.Fatalf("commit %s: %v %s %v, want %s", id, err, res.Status, res.Paths, want)
		}
	}

	early := create(p2)
	w1 := create(p1)
	execOK(t, p1.client, w1, "echo from-1 > a.txt")
	commit(p1, w1, api.StatusCommitted)
	if got := execOK(t, p2.client, create(p2), "cat a.txt"); got != "from-1\n" {
		t.Errorf("a Workspace of daemon 2 created after daemon 1's commit reads %q", got)
	}
	if got := execOK(t, p2.client, early, "cat a.txt"); got != "a\n" {
		t.Errorf("a Workspace of daemon 2 leased before daemon 1's commit reads %q", got)
	}
	execOK(t, p2.client, early, "echo from-2 > b.txt")
	commit(p2, early, api.StatusCommitted)
	if got := execOK(t, p1.client, create(p1), "cat a.txt b.txt"); got != "from-1\nfrom-2\n" {
		t.Errorf("daemon 1 after both commits reads %q", got)
	}

	x, y := create(p1), create(p2)
	execOK(t, p1.client, x, "echo x > c.txt")
	execOK(t, p2.client, y, "echo y > c.txt")
	commit(p2, y, api.StatusCommitted)
	commit(p1, x, api.StatusConflict)

	var ids [2][]string
	for i := range 8 {
		for j, p := range []*daemonProc{p1, p2} {
			id := create(p)
			execOK(t, p.client, id, fmt.Sprintf("echo %d > d%d-%d.txt", i, j, i))
			ids[j] = append(ids[j], id)
		}
	}
	parallel(t, 16, func(i int) error {
		p := []*daemonProc{p1, p2}[i%2]
		res, err := p.client.Commit(ctx, ids[i%2][i/2], api.CommitRequest{})
		if err == nil && res.Status != api.StatusCommitted {
			err = fmt.Errorf("concurrent commit %d: %s %v", i, res.Status, res.Paths)
		}
		return err
	})
	for j, p := range []*daemonProc{p1, p2} {
		if got := execOK(t, p.client, create(p), "cat d*.txt | wc -l; cat c.txt"); got != "16\ny\n" {
			t.Errorf("daemon %d after the concurrent commits: %q", j+1, got)
		}
	}
	holders := map[string]bool{}
	st, err := layerfs.Open(storePath, layerfs.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	ls, err := st.Backend().Leases()
	st.Close()
	for _, l := range ls {
		holders[l.Holder] = true
	}
	if err != nil || len(holders) != 2 {
		t.Errorf("lease holders %v, %v: want one per daemon", holders, err)
	}
	p1.stop(t)
	p2.stop(t)
}
