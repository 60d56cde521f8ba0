package integration

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/sessions"
)

// TestWorkspacesFollowTheHead: the daemon keeps a spare Workspace ready
// at the branch's head, and when a commit moves the head it shows the
// new head in that spare. Each Workspace made after a commit must show
// every commit before it and nothing a spare held before, whether it was
// made while the spare caught up or after.
func TestWorkspacesFollowTheHead(t *testing.T) {
	d := startDaemon(t, map[string]string{"n.txt": "0\n"}, sessions.Config{})
	for i := 0; i < 6; i++ {
		w := d.create(t, "main")
		if got := d.sh(t, w.ID, "cat n.txt; ls"); got != strconv.Itoa(i)+"\n"+lsAfter(i) {
			t.Fatalf("Workspace %d shows %q", i, got)
		}
		d.sh(t, w.ID, "echo "+strconv.Itoa(i+1)+" > n.txt && touch f"+strconv.Itoa(i))
		d.commit(t, w.ID, api.StatusCommitted)
		if err := d.End(w.ID, false); err != nil {
			t.Fatal(err)
		}
		if i%2 == 1 {
			time.Sleep(200 * time.Millisecond) // the spare has caught up
		}
	}
}

// TestSpareFitsEveryBranch: the spare Workspace is made before anyone
// knows which branch it will show, and shows whichever the next create
// asks for, at its head: a branch that moved after the spare was made,
// another branch, and the first again.
func TestSpareFitsEveryBranch(t *testing.T) {
	d := startDaemon(t, map[string]string{"n.txt": "main\n"}, sessions.Config{})
	w := d.create(t, "main") // and a spare is made for the next
	if _, err := d.st.Fork("feature", "main"); err != nil {
		t.Fatal(err)
	}
	d.sh(t, w.ID, "echo main2 > n.txt")
	d.commit(t, w.ID, api.StatusCommitted)
	f := d.create(t, "feature")
	d.sh(t, f.ID, "echo feature > n.txt && touch only-feature")
	d.commit(t, f.ID, api.StatusCommitted)
	for _, c := range []struct{ branch, want string }{
		{"main", "main2\nn.txt\n"},
		{"feature", "feature\nn.txt\nonly-feature\n"},
		{"main", "main2\nn.txt\n"},
	} {
		before := d.fromSpare(t)
		time.Sleep(100 * time.Millisecond) // the spare is ready
		w := d.create(t, c.branch)
		if got := d.sh(t, w.ID, "cat n.txt; ls"); got != c.want {
			t.Fatalf("a Workspace of %s shows %q, want %q", c.branch, got, c.want)
		}
		if w.Branch != c.branch {
			t.Fatalf("a Workspace of %s says it is of %s", c.branch, w.Branch)
		}
		if d.fromSpare(t) != before+1 {
			t.Fatalf("the Workspace of %s was not made from the spare", c.branch)
		}
		if err := d.End(w.ID, false); err != nil {
			t.Fatal(err)
		}
	}
}

// fromSpare reads how many Workspaces the daemon made from a spare.
func (d *testDaemon) fromSpare(t *testing.T) int {
	t.Helper()
	return d.metric(t, "layerfs_workspaces_from_spare_total")
}

// metric reads one of the daemon's counters.
func (d *testDaemon) metric(t *testing.T, name string) int {
	t.Helper()
	var b strings.Builder
	d.WriteMetrics(&b)
	for _, line := range strings.Split(b.String(), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in the metrics", name)
	return 0
}

// lsAfter is what ls lists after i commits of TestWorkspacesFollowTheHead.
func lsAfter(i int) string {
	out := ""
	for j := 0; j < i; j++ {
		out += "f" + strconv.Itoa(j) + "\n"
	}
	return out + "n.txt\n"
}
