package integration

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/sessions"
)

// TestHostPathReadOnlyDuringCommit: an editor outside writes through the
// Workspace's host path while a commit is between its capture and its
// switch to the new head. Those writes went to the old upperdir, which
// the switch then removed: they were lost without a word. Now they fail
// (EROFS), and once the commit is done the host path takes writes again,
// which the next commit lands.
func TestHostPathReadOnlyDuringCommit(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{Volume: sessions.VolumeOff})
	w := d.create(t, "main")
	d.sh(t, w.ID, "echo mine >> a.txt")
	var errs []error
	sessions.SetFailpointForTest(sessions.FailpointCaptured, func() error {
		errs = append(errs,
			os.WriteFile(filepath.Join(w.HostPath, "late.txt"), []byte("late\n"), 0o644),
			appendTo(filepath.Join(w.HostPath, "a.txt"), "late\n"),
			os.Mkdir(filepath.Join(w.HostPath, "dir"), 0o755))
		return nil
	})
	t.Cleanup(func() { sessions.SetFailpointForTest(sessions.FailpointCaptured, nil) })
	d.commit(t, w.ID, api.StatusCommitted)
	sessions.SetFailpointForTest(sessions.FailpointCaptured, nil)
	for i, err := range errs {
		if !errors.Is(err, syscall.EROFS) {
			t.Errorf("write %d through the host path during the commit: %v, want EROFS", i, err)
		}
	}
	if got := d.read(t, "main", "a.txt"); got != "a\nmine\n" {
		t.Fatalf("main's a.txt: %q", got)
	}
	// Writable again, on the new view: the next commit lands what is
	// written now.
	if err := os.WriteFile(filepath.Join(w.HostPath, "late.txt"), []byte("late\n"), 0o644); err != nil {
		t.Fatalf("write through the host path after the commit: %v", err)
	}
	in, err := d.Inspect(w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(in.Pending, "late.txt") {
		t.Fatalf("pending after a write through the host path: %v", in.Pending)
	}
	d.commit(t, w.ID, api.StatusCommitted)
	if got := d.read(t, "main", "late.txt"); got != "late\n" {
		t.Fatalf("main's late.txt: %q", got)
	}
}

// TestHostPathWritableAfterFailedCommit: a commit that fails after its
// capture leaves the host path writable, on the view it had.
func TestHostPathWritableAfterFailedCommit(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{Volume: sessions.VolumeOff})
	w := d.create(t, "main")
	d.sh(t, w.ID, "echo mine >> a.txt")
	clear := failAt(t, sessions.FailpointCaptured, 1)
	if res, err := d.Commit(w.ID, api.CommitRequest{}); !errors.Is(err, errInjected) {
		t.Fatalf("the commit with a failure after its capture: %+v, %v", res, err)
	}
	clear()
	if err := appendTo(filepath.Join(w.HostPath, "a.txt"), "outside\n"); err != nil {
		t.Fatalf("write through the host path after the failed commit: %v", err)
	}
	if got := d.sh(t, w.ID, "cat a.txt"); got != "a\nmine\noutside\n" {
		t.Fatalf("the Workspace reads %q", got)
	}
	d.commit(t, w.ID, api.StatusCommitted)
	if got := d.read(t, "main", "a.txt"); got != "a\nmine\noutside\n" {
		t.Fatalf("main's a.txt: %q", got)
	}
}

// TestCommitWithFileOpenAtHostPath: a file held open for writing through
// the host path keeps the kernel from making that mount read-only; the
// commit goes on as before rather than failing, and what was written
// before it lands.
func TestCommitWithFileOpenAtHostPath(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{Volume: sessions.VolumeOff})
	w := d.create(t, "main")
	f, err := os.OpenFile(filepath.Join(w.HostPath, "a.txt"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("open\n"); err != nil {
		t.Fatal(err)
	}
	d.commit(t, w.ID, api.StatusCommitted)
	if got := d.read(t, "main", "a.txt"); got != "a\nopen\n" {
		t.Fatalf("main's a.txt: %q", got)
	}
	f.Close()
	if err := os.WriteFile(filepath.Join(w.HostPath, "b.txt"), []byte("b\n"), 0o644); err != nil {
		t.Fatalf("write through the host path after the commit: %v", err)
	}
}

// appendTo appends text to the file at path.
func appendTo(path, text string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	return errors.Join(err, f.Close())
}
