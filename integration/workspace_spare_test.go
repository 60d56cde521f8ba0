package integration

import (
	"strconv"
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

// lsAfter is what ls lists after i commits of TestWorkspacesFollowTheHead.
func lsAfter(i int) string {
	out := ""
	for j := 0; j < i; j++ {
		out += "f" + strconv.Itoa(j) + "\n"
	}
	return out + "n.txt\n"
}
