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
