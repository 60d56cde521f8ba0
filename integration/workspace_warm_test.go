package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/sessions"
)

// cachedPages reports how many of a file's pages the kernel's page cache
// holds, and how many it has, without reading it.
func cachedPages(t *testing.T, path string) (cached, pages int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	for _, v := range vec {
		cached += int(v & 1)
	}
	return cached, len(vec)
}

// TestWorkspaceCommitWarmsBigFiles: after a commit, the new version of a
// big file the Workspace modified is read into the page cache of the
// Store's mount, so the next command's copy-up does not wait on FUSE; a new
// big file is not, and both read back exactly as committed. (On a volume
// that clones, a Workspace reads and copies up its data file instead:
// see TestWorkspaceBigFilesCloned.)
func TestWorkspaceCommitWarmsBigFiles(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 4<<20/16) // 4 MiB
	d := startDaemon(t, map[string]string{"big.bin": big}, sessions.Config{Volume: sessions.VolumeOff})
	w := d.create(t, "main")
	d.sh(t, w.ID, "printf XY | dd of=big.bin bs=1 seek=1000000 conv=notrunc status=none && head -c 3000000 big.bin > fresh.bin")
	res := d.commit(t, w.ID, api.StatusCommitted)
	lower := filepath.Join(d.stateDir, "lower", res.Commit)

	deadline := time.Now().Add(10 * time.Second)
	for {
		cached, pages := cachedPages(t, filepath.Join(lower, "big.bin"))
		if cached == pages {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the commit, %d of big.bin's %d pages are cached", cached, pages)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if cached, _ := cachedPages(t, filepath.Join(lower, "fresh.bin")); cached != 0 {
		t.Errorf("a new file was read ahead: %d pages cached", cached)
	}
	want := big[:1000000] + "XY" + big[1000002:]
	if got := d.sh(t, w.ID, "cat big.bin"); got != want {
		t.Fatal("big.bin reads back differently from what was committed")
	}
	if got := d.sh(t, w.ID, "cat fresh.bin"); got != want[:3000000] {
		t.Fatal("fresh.bin reads back differently from what was committed")
	}
}

// TestWorkspaceLooksUpHotFilesAhead: the first command in a view of a
// Commit this daemon landed starts with the big files that Commit changed
// looked up in the view (so the command's open need not wait for the
// lookup through FUSE), once per view; a symlink put in the way through
// the host path is not followed; and what the commands see is unchanged.
func TestWorkspaceLooksUpHotFilesAhead(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 2<<20/16) // 2 MiB
	d := startDaemon(t, map[string]string{"big.bin": big, "sub/keep": "k\n"}, sessions.Config{})
	const ahead = "layerfs_lookups_ahead_total"
	waitFor := func(want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for d.metric(t, ahead) != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s is %d, want %d", ahead, d.metric(t, ahead), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	a := d.create(t, "main")
	d.sh(t, a.ID, "printf XY | dd of=big.bin bs=1 seek=1000 conv=notrunc status=none && head -c 1500000 big.bin > sub/new.bin && printf small > small.txt")
	if n := d.metric(t, ahead); n != 0 {
		t.Fatalf("a view of the initial Commit looked up %d files ahead; this daemon changed none", n)
	}
	d.commit(t, a.ID, api.StatusCommitted)
	want := big[:1000] + "XY" + big[1002:]

	// The next command in a, in its view of its own Commit, and the first
	// in a new Workspace: both big files each time, the small one never.
	d.sh(t, a.ID, "true")
	waitFor(2)
	b := d.create(t, "main")
	if got := d.sh(t, b.ID, "cat big.bin"); got != want {
		t.Fatal("big.bin reads back differently from what was committed")
	}
	waitFor(4)
	if got := d.sh(t, b.ID, "cat sub/new.bin"); got != want[:1500000] {
		t.Fatal("sub/new.bin reads back differently from what was committed")
	}
	if n := d.metric(t, ahead); n != 4 {
		t.Fatalf("a second command in the same view looked files up again: %s %d, want 4", ahead, n)
	}

	// sub made a symlink within the view, through the host path, before
	// any command runs: the lookup ahead stops at it, as at any symlink,
	// instead of following it.
	c := d.create(t, "main")
	if err := os.Mkdir(filepath.Join(c.HostPath, "other"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.HostPath, "other", "new.bin"), []byte("other"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(c.HostPath, "sub")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("other", filepath.Join(c.HostPath, "sub")); err != nil {
		t.Fatal(err)
	}
	d.sh(t, c.ID, "true")
	waitFor(5) // big.bin only: one goroutine adds all it found at once
	if got := d.sh(t, c.ID, "cat sub/new.bin"); got != "other" {
		t.Fatalf("sub/new.bin through the symlink reads %q", got)
	}
	for _, w := range []api.Workspace{a, b} {
		if err := d.End(w.ID, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.End(c.ID, true); err != nil {
		t.Fatal(err)
	}
}
