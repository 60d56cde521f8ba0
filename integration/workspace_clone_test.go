package integration

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/sessions"
)

// volumeFree is the free bytes of the daemon's Workspace volume.
func volumeFree(t *testing.T, d *testDaemon) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Join(d.stateDir, "ws"), &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// dataFile is the path of the data file the daemon keeps of the content
// of path at ref, which must exist.
func dataFile(t *testing.T, d *testDaemon, ref, path string) string {
	t.Helper()
	f, err := d.st.FS(ref)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := f.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(d.stateDir, "ws", ".data", fi.ID.String())
	// Made in the background once its Commit has landed.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		_, err := os.Stat(p)
		if err == nil {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("no data file of %s:%s: %v", ref, path, err)
		}
	}
}

// TestWorkspaceBigFilesCloned: on the daemon's XFS volume, a big file a
// Workspace commits is kept as a data file; later Workspaces read it there
// and copy it up by cloning it — a 10-byte edit of an 8 MiB file takes
// the volume no space to speak of — and capture finds the edit in the
// block maps. Every version reads back exactly, through the Store and
// through fresh Workspaces, and metadata-only changes (chmod, rename)
// keep the content.
//
// It runs on the daemon's XFS image, and on a state directory that is
// itself on btrfs, which the daemon uses as it is.
func TestWorkspaceBigFilesCloned(t *testing.T) {
	t.Run("xfs image", func(t *testing.T) {
		needVolume(t)
		bigFilesCloned(t, sessions.Config{})
	})
	t.Run("btrfs state dir", func(t *testing.T) {
		state := filepath.Join(t.TempDir(), "state")
		mountFS(t, "btrfs", state)
		bigFilesCloned(t, sessions.Config{StateDir: state})
		if _, err := os.Stat(filepath.Join(state, "ws.img")); err == nil {
			t.Error("the daemon made an image on a state directory that clones files")
		}
	})
}

// mountFS mounts a fresh filesystem of type fs (mkfs.fs, a 1 GiB image)
// at dir until the test ends; it skips the test without mkfs.fs, unless
// LAYERFS_REQUIRE_ROOT=1.
func mountFS(t *testing.T, fs, dir string) {
	t.Helper()
	mkfs, err := lookSbin("mkfs." + fs)
	if err != nil {
		if os.Getenv("LAYERFS_REQUIRE_ROOT") == "1" {
			t.Fatalf("LAYERFS_REQUIRE_ROOT=1 but no mkfs.%s: %v", fs, err)
		}
		t.Skipf("no mkfs.%s: %v", fs, err)
	}
	img := filepath.Join(t.TempDir(), fs+".img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 1<<30); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(mkfs, "-q", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.%s: %v %s", fs, err, out)
	}
	os.MkdirAll(dir, 0o755)
	if out, err := exec.Command("mount", "-o", "loop", img, dir).CombinedOutput(); err != nil {
		t.Fatalf("mount %s: %v %s", img, err, out)
	}
	t.Cleanup(func() { // after the daemon's close, registered later
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount the %s: %v", fs, err)
			unix.Unmount(dir, unix.MNT_DETACH)
		}
	})
}

func bigFilesCloned(t *testing.T, cfg sessions.Config) {
	const size = 8 << 20
	model := randomBytes(11, size)
	src := filepath.Join(t.TempDir(), "src")
	os.MkdirAll(src, 0o755)
	if err := os.WriteFile(filepath.Join(src, "big.bin"), model, 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDaemonFrom(t, src, cfg)
	edit := func(off int, s string) {
		t.Helper()
		w := d.create(t, "main")
		d.sh(t, w.ID, "printf "+s+" | dd of=big.bin bs=1 seek="+strconv.Itoa(off)+" conv=notrunc status=none")
		copy(model[off:], s)
		res := d.commit(t, w.ID, api.StatusCommitted)
		if res.Receipt.BytesStored > 256<<10 {
			t.Errorf("a %d-byte edit stored %d bytes", len(s), res.Receipt.BytesStored)
		}
		if err := d.End(w.ID, false); err != nil {
			t.Fatal(err)
		}
		if got := []byte(d.read(t, "main", "big.bin")); !bytes.Equal(got, model) {
			t.Fatalf("after the edit at %d the Store's big.bin differs from the model", off)
		}
	}

	// The first edit copies up through FUSE: the content came from init.
	edit(1000, "first")
	data := dataFile(t, d, "main", "big.bin")
	if got, err := os.ReadFile(data); err != nil || !bytes.Equal(got, model) {
		t.Fatalf("the data file differs from the committed content (%v)", err)
	}

	// Later ones clone the data file: the copy-up takes ~no space.
	for i, off := range []int{5, 3 << 20, size - 3, 4096*100 + 7} {
		w := d.create(t, "main")
		if got := d.sh(t, w.ID, "cat big.bin"); got != string(model) {
			t.Fatalf("edit %d: the Workspace reads a big.bin that differs from the model", i)
		}
		free := volumeFree(t, d)
		d.sh(t, w.ID, "printf XYZ | dd of=big.bin bs=1 seek="+strconv.Itoa(off)+" conv=notrunc status=none")
		if used := free - volumeFree(t, d); used > 1<<20 {
			t.Errorf("edit %d: the copy-up took %d bytes of the volume: not a clone", i, used)
		}
		copy(model[off:], "XYZ")
		res := d.commit(t, w.ID, api.StatusCommitted)
		if res.Receipt.BytesStored > 256<<10 {
			t.Errorf("edit %d: stored %d bytes", i, res.Receipt.BytesStored)
		}
		if i == 0 {
			// Its data file, made after the commit, is what the next
			// Workspace reads: the commit's read-ahead (warm.go) must not
			// read the new version through the Store's mount meanwhile.
			time.Sleep(300 * time.Millisecond)
			if cached, _ := cachedPages(t, filepath.Join(d.stateDir, "lower", res.Commit, "big.bin")); cached != 0 {
				t.Errorf("edit %d: %d pages of the new version were read through the mount", i, cached)
			}
		}
		if err := d.End(w.ID, false); err != nil {
			t.Fatal(err)
		}
		if got := []byte(d.read(t, "main", "big.bin")); !bytes.Equal(got, model) {
			t.Fatalf("edit %d at %d: the Store's big.bin differs from the model", i, off)
		}
	}

	// Metadata only: content unchanged under the new mode and name.
	w := d.create(t, "main")
	d.sh(t, w.ID, "chmod 600 big.bin && mv big.bin moved.bin && chmod 640 moved.bin")
	d.commit(t, w.ID, api.StatusCommitted)
	f, err := d.st.FS("main")
	if err != nil {
		t.Fatal(err)
	}
	fi, err := f.Stat("moved.bin")
	if err != nil || fi.Mode != 0o640 || fi.Size != size {
		t.Fatalf("moved.bin: %+v, %v; want mode 640, %d bytes", fi, err, size)
	}
	if ok, _ := f.Exists("big.bin"); ok {
		t.Error("big.bin is still there after the rename")
	}
	if got := []byte(d.read(t, "main", "moved.bin")); !bytes.Equal(got, model) {
		t.Fatal("moved.bin differs from the model")
	}
	// A fresh Workspace, and a write to the renamed file, which now copies
	// up its data.
	if got := d.sh(t, w.ID, "cat moved.bin"); got != string(model) {
		t.Fatal("a Workspace on the renamed file reads other bytes")
	}
	d.sh(t, w.ID, "printf Q >> moved.bin")
	model = append(model, 'Q')
	d.commit(t, w.ID, api.StatusCommitted)
	if got := []byte(d.read(t, "main", "moved.bin")); !bytes.Equal(got, model) {
		t.Fatal("moved.bin after an append differs from the model")
	}
	// Every committed version has its data file (none were evicted: the
	// budget is a quarter of the volume). The last one may still be in
	// the making: a data file found by block maps is cloned after its
	// Commit lands.
	var m bytes.Buffer
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		m.Reset()
		d.WriteMetrics(&m)
		if strings.Contains(m.String(), "\nlayerfs_data_files 6\n") || time.Now().After(deadline) {
			break
		}
	}
	if !strings.Contains(m.String(), "\nlayerfs_data_files 6\n") {
		t.Errorf("metrics: want 6 data files, one per committed version:\n%s", m.String())
	}
	// The last, made after its Commit, holds exactly that version.
	if got, err := os.ReadFile(dataFile(t, d, "main", "moved.bin")); err != nil || !bytes.Equal(got, model) {
		t.Errorf("the data file of main:moved.bin differs from the model (%v)", err)
	}
}

// needVolume skips a test that needs the daemon's XFS volume where
// mkfs.xfs is missing, and fails it when LAYERFS_REQUIRE_ROOT=1 (CI
// installs xfsprogs).
func needVolume(t *testing.T) {
	t.Helper()
	if _, err := lookSbin("mkfs.xfs"); err != nil {
		if os.Getenv("LAYERFS_REQUIRE_ROOT") == "1" {
			t.Fatalf("LAYERFS_REQUIRE_ROOT=1 but no mkfs.xfs (xfsprogs): %v", err)
		}
		t.Skipf("no mkfs.xfs (xfsprogs): %v", err)
	}
}

// TestWorkspaceRebaseCopiesMetacopyUp: a file renamed in a Workspace is
// copied up metadata only, its data still the lower layer's. When the
// Workspace's commit conflicts and it is rebased onto the head it met,
// where another Workspace changed the original, the renamed file must
// keep the content it was renamed with, not follow the new lower layer.
func TestWorkspaceRebaseCopiesMetacopyUp(t *testing.T) {
	orig, kept := randomBytes(12, 2<<20), randomBytes(13, 2<<20)
	src := filepath.Join(t.TempDir(), "src")
	os.MkdirAll(src, 0o755)
	for name, data := range map[string][]byte{"big.bin": orig, "keep.bin": kept, ".layerfsignore": []byte("scratch/\n")} {
		if err := os.WriteFile(filepath.Join(src, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, cfg := range []sessions.Config{{}, {Volume: sessions.VolumeOff}} {
		d := startDaemonFrom(t, src, cfg)
		a, b := d.create(t, "main"), d.create(t, "main")
		// keep.bin goes where nothing is captured: the rebase must copy
		// it up all the same.
		d.sh(t, a.ID, "mv big.bin moved.bin && chmod 600 moved.bin && mkdir scratch && mv keep.bin scratch/")
		d.sh(t, b.ID, "for f in big.bin keep.bin; do printf CHANGED | dd of=$f bs=1 seek=100 conv=notrunc status=none; done")
		d.commit(t, b.ID, api.StatusCommitted)
		d.commit(t, a.ID, api.StatusConflict) // deleted here, modified there
		if got := d.sh(t, a.ID, "cat moved.bin"); got != string(orig) {
			t.Fatalf("volume %q: after the rebase moved.bin reads other bytes than were renamed", cfg.Volume)
		}
		if got := d.sh(t, a.ID, "cat scratch/keep.bin"); got != string(kept) {
			t.Fatalf("volume %q: after the rebase the ignored scratch/keep.bin reads other bytes than were renamed", cfg.Volume)
		}
		if got := d.sh(t, a.ID, "stat -c %a moved.bin"); got != "600\n" {
			t.Errorf("volume %q: moved.bin mode %q after the rebase", cfg.Volume, got)
		}
		// The deletions that conflicted are still this Workspace's
		// version: refused until forced (there is nothing to rm).
		if _, err := d.Commit(a.ID, api.CommitRequest{}); !errors.Is(err, sessions.ErrUnsettled) {
			t.Fatalf("volume %q: commit over the unsettled deletions: %v", cfg.Volume, err)
		}
		if res, err := d.Commit(a.ID, api.CommitRequest{Force: true}); err != nil || res.Status != api.StatusCommitted {
			t.Fatalf("volume %q: forced commit: %+v %v", cfg.Volume, res, err)
		}
		if got := d.read(t, "main", "moved.bin"); got != string(orig) {
			t.Fatalf("volume %q: committed moved.bin differs from what was renamed", cfg.Volume)
		}
	}
}

// TestWorkspaceVolumeFull: a command that fills the Workspaces' volume
// gets ENOSPC, like on a full disk; what the Workspaces hold stays, the
// Workspace can still commit what fit, and the space comes back when the
// Workspace drops its changes.
func TestWorkspaceVolumeFull(t *testing.T) {
	needVolume(t)
	d := startDaemon(t, map[string]string{"README": "full\n"}, sessions.Config{VolumeSize: 512 << 20})
	other := d.create(t, "main")
	d.sh(t, other.ID, "echo kept > other.txt")
	w := d.create(t, "main")
	res, err := d.Exec(context.Background(), w.ID, api.ExecRequest{Argv: []string{"sh", "-c",
		"echo small > small.txt && dd if=/dev/zero of=huge.bin bs=1M count=1024 status=none"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 || !strings.Contains(res.Stderr, "No space left on device") {
		t.Fatalf("writing 1 GiB into a 512 MiB volume: exit %d, stderr %q; want ENOSPC", res.ExitCode, res.Stderr)
	}
	if got := d.sh(t, other.ID, "cat other.txt"); got != "kept\n" {
		t.Errorf("the other Workspace reads %q", got)
	}
	d.sh(t, w.ID, "rm huge.bin")
	d.commit(t, w.ID, api.StatusCommitted)
	if got := d.read(t, "main", "small.txt"); got != "small\n" {
		t.Errorf("small.txt committed as %q", got)
	}
	// Space is back: a 100 MiB file fits again.
	d.sh(t, w.ID, "dd if=/dev/zero of=again.bin bs=1M count=100 status=none && rm again.bin")
	d.commit(t, other.ID, api.StatusCommitted)
}

// lookSbin finds a command in PATH, else in /usr/sbin or /sbin, which a
// PATH may lack.
func lookSbin(name string) (string, error) {
	p, err := exec.LookPath(name)
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		if err != nil {
			p, err = exec.LookPath(filepath.Join(dir, name))
		}
	}
	return p, err
}

// TestWorkspaceRebaseOnFullVolume: a conflict's rebase that cannot write
// its marker blocks (another Workspace filled the volume) fails, keeps the
// Workspace's own version of the file, and leaves the Workspace usable:
// its view is shown again (read-only while the volume is full: overlayfs
// cannot make its work directory), and once there is space the commit
// conflicts and writes its markers as usual.
func TestWorkspaceRebaseOnFullVolume(t *testing.T) {
	needVolume(t)
	d := startDaemon(t, map[string]string{"s.txt": "s\n", "t.txt": "one\ntwo\n"}, sessions.Config{VolumeSize: 512 << 20})
	a, b, c := d.create(t, "main"), d.create(t, "main"), d.create(t, "main")
	d.sh(t, a.ID, "echo 'one by a' > t.txt; echo 's by a' > s.txt")
	d.sh(t, b.ID, "echo 's by b' > s.txt")
	d.commit(t, a.ID, api.StatusCommitted)
	// b's t.txt fills one block; with marker blocks it needs two.
	d.sh(t, b.ID, "{ echo 'one by b'; head -c 4000 /dev/zero | tr '\\0' x; echo; } > t.txt")
	d.exec(t, c.ID, nil, "sh", "-c", "dd if=/dev/zero of=fill bs=1M count=1024 status=none; dd if=/dev/zero of=rest bs=4k status=none; sync")
	if _, err := d.Commit(b.ID, api.CommitRequest{}); err == nil || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("rebase on a full volume: %v", err)
	}
	if got := d.sh(t, b.ID, "head -1 t.txt"); got != "one by b\n" {
		t.Fatalf("b's t.txt after the failed rebase: %q", got)
	}
	// All or nothing: no file got its markers.
	if got := d.sh(t, b.ID, "cat s.txt"); got != "s by b\n" {
		t.Fatalf("b's s.txt after the failed rebase: %q", got)
	}
	if w, err := d.Inspect(b.ID); err != nil || !slices.Contains(w.Pending, "t.txt") {
		t.Fatalf("inspect after the failed rebase: %+v %v", w, err)
	}
	d.sh(t, c.ID, "rm fill rest")
	res := d.commit(t, b.ID, api.StatusConflict)
	if strings.Join(res.Markers, " ") != "s.txt t.txt" {
		t.Fatalf("markers %v", res.Markers)
	}
	if got := d.sh(t, b.ID, "cat t.txt"); !strings.Contains(got, "<<<<<<< ours\none by b\n") {
		t.Fatalf("b's t.txt after the rebase: %q", got)
	}
	d.sh(t, b.ID, "echo 'one by a and b' > t.txt; echo 's by a and b' > s.txt")
	d.commit(t, b.ID, api.StatusCommitted)
}

// TestEvictionWhileUnrestored: the data layer evicts by the views of
// live Workspaces only; one the daemon could not restore at a start has
// none, yet its upperdir holds a file copied up metadata only (chmod,
// rename) whose data was, when it was written, the data file of the
// content it had. That data file is evicted while the Workspace waits;
// the next start restores it and it reads its file whole: the new
// overlay's lookups ask the Store's mount again, which no longer names
// the data file, and the upperdir names none itself.
func TestEvictionWhileUnrestored(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	mountFS(t, "btrfs", state)
	// The data layer keeps a quarter of this: one version of big.bin.
	cfg := sessions.Config{StateDir: state, VolumeSize: 40 << 20}
	const size = 8 << 20
	model := randomBytes(12, size)
	src := filepath.Join(t.TempDir(), "src")
	os.MkdirAll(src, 0o755)
	if err := os.WriteFile(filepath.Join(src, "big.bin"), model, 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDaemonFrom(t, src, cfg)
	edit := func(off int) {
		t.Helper()
		w := d.create(t, "main")
		d.sh(t, w.ID, "printf XYZ | dd of=big.bin bs=1 seek="+strconv.Itoa(off)+" conv=notrunc status=none")
		d.commit(t, w.ID, api.StatusCommitted)
		if err := d.End(w.ID, false); err != nil {
			t.Fatal(err)
		}
	}
	edit(1000)
	data := dataFile(t, d, "main", "big.bin")
	v1 := []byte(d.read(t, "main", "big.bin"))
	waiting := d.create(t, "main")
	d.sh(t, waiting.ID, "chmod 600 big.bin && mv big.bin moved.bin")
	if got := d.sh(t, waiting.ID, "cat moved.bin"); got != string(v1) {
		t.Fatal("moved.bin differs from big.bin before the restart")
	}
	// What the test is about: the upperdir's file is a metacopy.
	upper := filepath.Join(state, "ws", waiting.ID, "upper-0", "moved.bin")
	if _, err := unix.Lgetxattr(upper, "trusted.overlay.metacopy", nil); err != nil {
		t.Fatalf("the upperdir's moved.bin is not a metacopy: %v", err)
	}
	redirect := make([]byte, 256)
	if n, err := unix.Lgetxattr(upper, "trusted.overlay.redirect", redirect); err == nil {
		t.Logf("the upperdir's moved.bin redirects to %q", redirect[:n])
	}
	restart := func() {
		t.Helper()
		d2, err := sessions.Start(sessions.Config{Store: d.st.Backend(), StateDir: state, Self: layerfsBin, VolumeSize: cfg.VolumeSize})
		if err != nil {
			t.Fatal(err)
		}
		d.Daemon = d2
	}
	if err := d.Daemon.Close(); err != nil {
		t.Fatal(err)
	}
	clear := failAt(t, sessions.FailpointResume, 1)
	restart()
	clear()
	if h := d.Health(); len(h.Unrestored) != 1 || h.Unrestored[0].ID != waiting.ID {
		t.Fatalf("health: %+v", h)
	}
	for i := 0; ; i++ {
		if _, err := os.Stat(data); errors.Is(err, os.ErrNotExist) {
			break
		}
		if i == 5 {
			t.Fatalf("the data file of the content moved.bin has is not evicted after %d commits", i)
		}
		edit(2000 + i)
		dataFile(t, d, "main", "big.bin")
	}
	if err := d.Daemon.Close(); err != nil {
		t.Fatal(err)
	}
	restart()
	if h := d.Health(); len(h.Unrestored) != 0 {
		t.Fatalf("health after the next start: %+v", h)
	}
	if got := d.sh(t, waiting.ID, "cat moved.bin"); got != string(v1) {
		t.Fatalf("the restored Workspace reads %d bytes of moved.bin, not its content", len(got))
	}
	if in, err := d.Inspect(waiting.ID); err != nil || !slices.Equal(in.Pending, []string{"big.bin", "moved.bin"}) {
		t.Fatalf("inspect: %+v, %v", in.Pending, err)
	}
}
