package integration

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/sessions"
)

var errInjected = errors.New("injected failure")

// failAt makes the daemon fail at failpoint name until the test ends or
// the returned function is called.
func failAt(t *testing.T, name string) (clear func()) {
	sessions.SetFailpointForTest(name, func() error { return errInjected })
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
			clear := failAt(t, fp)
			if res, err := d.Commit(w.ID, api.CommitRequest{}); !errors.Is(err, errInjected) {
				t.Fatalf("the commit through a failing switch: %+v, %v", res, err)
			}
			clear()
			checkOnOldView(t, d, w, []string{"a.txt", "later.txt"})
			// The changes it shows pending, one of which landed, commit
			// again as one change.
			d.commit(t, w.ID, api.StatusCommitted)
			if got := d.read(t, "main", "a.txt") + d.read(t, "main", "later.txt"); got != "a\nmine\nlater\n" {
				t.Fatalf("main after the second commit: %q", got)
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
