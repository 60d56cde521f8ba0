package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/sessions"
)

// longDir is a directory path of 4024 bytes: with the upperdir's path in
// front, longer than PATH_MAX.
func longDir() string {
	return "long" + strings.Repeat("/"+strings.Repeat("n", 200), 20)
}

// What a commit leaves out of the Store at a path longer than PATH_MAX
// with the upperdir in front — an ignored file, a FIFO — the Workspace
// keeps, as it keeps them at a short path; also through a conflict's
// rebase and a discard.
func TestWorkspaceKeepsLongPaths(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n", ".layerfsignore": "*.log\n"}, sessions.Config{})
	w := d.create(t, "main")
	dir := longDir()
	d.sh(t, w.ID, fmt.Sprintf("mkdir -p %s && cd %s && echo kept > x.log && mkfifo pipe && echo c > c.txt", dir, dir))
	res := d.commit(t, w.ID, api.StatusCommitted)
	if len(res.Dropped) != 0 || len(res.Kept) != 2 {
		t.Fatalf("commit: kept %v, dropped %v; want both kept", res.Kept, res.Dropped)
	}
	check := func(when string) {
		t.Helper()
		if out := d.sh(t, w.ID, fmt.Sprintf("cd %s && cat x.log && test -p pipe && echo fifo", dir)); out != "kept\nfifo\n" {
			t.Fatalf("%s: the Workspace reads %q", when, out)
		}
	}
	check("after the commit")
	d.sh(t, w.ID, "echo more > a.txt")
	if _, err := d.Discard(w.ID, false); err != nil {
		t.Fatal(err)
	}
	check("after a discard")
}

// A conflict on a file at a path longer than PATH_MAX with the upperdir
// in front writes its marker blocks there, as at a short path.
func TestWorkspaceConflictAtLongPath(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{})
	dir := longDir()
	file := dir + "/c.txt"
	w := d.create(t, "main")
	d.sh(t, w.ID, fmt.Sprintf("mkdir -p %s && printf '1\\n2\\n3\\n' > %s", dir, file))
	d.commit(t, w.ID, api.StatusCommitted)
	a, b := d.create(t, "main"), d.create(t, "main")
	d.sh(t, a.ID, fmt.Sprintf("printf '1\\nA\\n3\\n' > %s", file))
	d.sh(t, b.ID, fmt.Sprintf("printf '1\\nB\\n3\\n' > %s", file))
	d.commit(t, a.ID, api.StatusCommitted)
	res := d.commit(t, b.ID, api.StatusConflict)
	if len(res.Markers) != 1 || res.Markers[0] != file {
		t.Fatalf("conflict: markers in %v, want %.20s...", res.Markers, file)
	}
	if out := d.sh(t, b.ID, "cat "+file); !strings.Contains(out, "<<<<<<< ours\nB\n") || !strings.Contains(out, "=======\nA\n>>>>>>> head ") {
		t.Fatalf("the refused Workspace's file: %q", out)
	}
}

// A commit whose switch failed, of a file at a path longer than PATH_MAX
// with the host path in front, is followed at the next commit, as at a
// short path, whether or not a command wrote since: that commit failed,
// and every one after it, looking the path up in the view
// ("file name too long").
func TestCommitAfterSwitchFailedAtLongPath(t *testing.T) {
	for _, since := range []string{"", "echo later >> c.txt"} {
		t.Run(fmt.Sprintf("written since %v", since != ""), func(t *testing.T) {
			d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{Volume: sessions.VolumeOff})
			dir := longDir()
			w := d.create(t, "main")
			d.sh(t, w.ID, fmt.Sprintf("mkdir -p %s && echo c > %s/c.txt", dir, dir))
			failSwitch(t, d, w.ID)
			landed := d.head(t)
			if since != "" {
				d.sh(t, w.ID, "cd "+dir+" && "+since)
			}
			want := api.StatusUpToDate
			if since != "" {
				want = api.StatusCommitted
			}
			res := d.commit(t, w.ID, want)
			if res.Head != landed && want == api.StatusUpToDate {
				t.Fatalf("the commit after the failed switch: %+v (landed %.12s)", res, landed)
			}
			in, err := d.Inspect(w.ID)
			if err != nil {
				t.Fatal(err)
			}
			if in.Lease != d.head(t) || len(in.Pending) != 0 {
				t.Fatalf("after the commit: lease %.12s (head %.12s), pending %v", in.Lease, d.head(t), in.Pending)
			}
		})
	}
}

// The same, where another commit changed the file before the one whose
// switch failed landed on it, and a command wrote to it since: what it
// wrote is merged with the landed version, read through the view at
// its long path.
func TestCommitAfterSwitchFailedAtLongPathMerged(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{Volume: sessions.VolumeOff})
	dir := longDir()
	file := dir + "/c.txt"
	lines := func(l ...string) string { return strings.Join(l, "\\n") + "\\n" }
	w0 := d.create(t, "main")
	d.sh(t, w0.ID, fmt.Sprintf("mkdir -p %s && printf '%s' > %s", dir, lines("1", "2", "3", "4", "5", "6", "7"), file))
	d.commit(t, w0.ID, api.StatusCommitted)
	a, w := d.create(t, "main"), d.create(t, "main")
	d.sh(t, a.ID, fmt.Sprintf("printf '%s' > %s", lines("A", "2", "3", "4", "5", "6", "7"), file))
	d.commit(t, a.ID, api.StatusCommitted)
	d.sh(t, w.ID, fmt.Sprintf("printf '%s' > %s", lines("1", "2", "3", "4", "5", "6", "W"), file))
	failSwitch(t, d, w.ID)
	d.sh(t, w.ID, fmt.Sprintf("sed -i s/^4$/L/ %s", file))
	d.commit(t, w.ID, api.StatusCommitted)
	if got := d.read(t, "main", file); got != "A\n2\n3\nL\n5\n6\nW\n" {
		t.Fatalf("main's file: %q", got)
	}
}
