package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runLayerfs runs the CLI binary and fails the test on a non-zero exit.
func runLayerfs(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(layerfsBin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("layerfs %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// TestStoreOnOverlayIsUnsupported puts a Store on a kernel overlayfs mount,
// which it must refuse with an error naming the filesystem.
func TestStoreOnOverlayIsUnsupported(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"lower", "upper", "work", "mnt"} {
		os.Mkdir(filepath.Join(dir, d), 0o755)
	}
	mnt := filepath.Join(dir, "mnt")
	opts := "lowerdir=" + filepath.Join(dir, "lower") + ",upperdir=" + filepath.Join(dir, "upper") + ",workdir=" + filepath.Join(dir, "work")
	if out, err := exec.Command("mount", "-t", "overlay", "overlay", "-o", opts, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount overlay: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "a"), []byte("a"), 0o644)
	cmd := exec.Command(layerfsBin, "init", "--store", filepath.Join(mnt, "s.layerfs"), src)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 6 || !strings.Contains(string(out), "overlayfs") {
		t.Fatalf("init on overlayfs: %v %s; want exit 6 naming overlayfs", err, out)
	}
}
