package bench

import (
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// plainOverlayExec is the floor under a Workspace command that edits a big
// lower file in place: the same script run in a plain overlayfs whose
// lower layer is an ext4 directory holding a 32 MiB file of random bytes,
// already in the page cache (the kernel's best case), with the options a
// Workspace's overlay has. Each run gets a fresh upper and work directory,
// so the script's first write copies the whole file up, as in a fresh
// Workspace. It returns the median time of `sh -c script` there (mount
// and unmount not counted).
func plainOverlayExec(b *testing.B, runs int, script func(i int) string) samples {
	b.Helper()
	dir := wsTempDir(b)
	lower := filepath.Join(dir, "lower")
	data := make([]byte, wsBigSize)
	rand.New(rand.NewSource(5)).Read(data)
	if err := os.MkdirAll(lower, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lower, "big.bin"), data, 0o644); err != nil {
		b.Fatal(err)
	}
	if _, err := os.ReadFile(filepath.Join(lower, "big.bin")); err != nil { // into the page cache
		b.Fatal(err)
	}
	var out samples
	for i := 0; i < runs; i++ {
		run := filepath.Join(dir, "run"+string(rune('a'+i%26))+string(rune('a'+i/26)))
		upper, work, mnt := filepath.Join(run, "upper"), filepath.Join(run, "work"), filepath.Join(run, "mnt")
		for _, d := range []string{upper, work, mnt} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		opts := "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work +
			",redirect_dir=on,metacopy=off,index=off,xino=off,volatile"
		if err := unix.Mount("overlay", mnt, "overlay", 0, opts); err != nil {
			b.Fatalf("mount plain overlay: %v", err)
		}
		cmd := exec.Command("sh", "-c", script(i))
		cmd.Dir = mnt
		var err error
		var outb []byte
		out.time(func() { outb, err = cmd.CombinedOutput() })
		unix.Unmount(mnt, unix.MNT_DETACH)
		if err != nil {
			b.Fatalf("%s: %v\n%s", script(i), err, outb)
		}
		os.RemoveAll(run)
	}
	return out
}
