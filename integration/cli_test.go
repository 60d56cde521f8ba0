package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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

// TestStoreReadOnlyToTheUser: a user who may read a Store's file but not
// write it can read the Store; a write says why it cannot. Before, every
// command failed with SQLite's "attempt to write a readonly database".
// The read creates nothing, even where the directory lets it: a
// shared-memory file left by another user had locked the owner out.
func TestStoreReadOnlyToTheUser(t *testing.T) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil || os.Geteuid() != 0 {
		if os.Getenv("LAYERFS_REQUIRE_ROOT") == "1" {
			t.Fatalf("LAYERFS_REQUIRE_ROOT=1 but no setpriv or not root: %v", err)
		}
		t.Skip("needs root and setpriv (util-linux)")
	}
	if bin, err := os.Stat(layerfsBin); err != nil || bin.Mode().Perm()&0o005 != 0o005 {
		t.Skipf("%s is not executable by others", layerfsBin)
	}
	src := t.TempDir()
	writeTree(t, src, map[string]string{"a.txt": "a\n"})
	for _, mode := range []os.FileMode{0o755, 0o777 | os.ModeSticky} { // theirs; a shared one like /tmp
		// Under /tmp, which anyone may enter, not the test's 0700 dirs.
		dir, err := os.MkdirTemp("/tmp", "layerfs-ro-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		store := filepath.Join(dir, "s.layerfs")
		runLayerfs(t, "init", "--quiet", "--store", store, src)
		as := func(args ...string) (string, string, error) {
			cmd := exec.Command(setpriv, append([]string{"--reuid", "65534", "--regid", "65534", "--clear-groups", layerfsBin}, args...)...)
			cmd.Stdin = strings.NewReader("x\n")
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			return out.String(), errb.String(), err
		}
		if out, errs, err := as("cat", "--store", store, "main:a.txt"); err != nil || out != "a\n" {
			t.Errorf("dir %v: cat as another user: %q %q %v", mode, out, errs, err)
		}
		if _, errs, err := as("fs", "write", "--store", store, "b.txt"); err == nil || !strings.Contains(errs, "you may not write") {
			t.Errorf("dir %v: a write as another user: %q %v", mode, errs, err)
		}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if fi, err := e.Info(); err == nil {
				if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 {
					t.Errorf("dir %v: the other user's read left %s behind", mode, e.Name())
				}
			}
		}
		cmd := exec.Command(layerfsBin, "fs", "write", "--store", store, "c.txt")
		cmd.Stdin = strings.NewReader("c\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("dir %v: the owner's write after the other's read: %v %s", mode, err, out)
		}
	}
}

// TestStoreInDirectoryNotOurs: a Store file another user may write, in a
// directory that user may not write, is read-only to them — SQLite could
// not make its shared-memory and WAL files beside it — and reads work. They
// failed, every one, with "attempt to write a readonly database".
func TestStoreInDirectoryNotOurs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run the CLI as another user")
	}
	dir, err := os.MkdirTemp("/tmp", "layerfs-notours-") // the test temp root is 0700
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // root's: others may enter, not write
		t.Fatal(err)
	}
	src := filepath.Join(dir, "src")
	os.Mkdir(src, 0o755)
	os.WriteFile(filepath.Join(src, "a.txt"), []byte("hello\n"), 0o644)
	st := filepath.Join(dir, "s.layerfs")
	runLayerfs(t, "init", "--store", st, src)
	for _, suffix := range []string{"-shm", "-wal"} {
		if _, err := os.Stat(st + suffix); err == nil {
			t.Fatalf("%s left after init", st+suffix)
		}
	}
	if err := os.Chmod(st, 0o666); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "layerfs")
	data, err := os.ReadFile(layerfsBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	asNobody := func(args ...string) (string, string, error) {
		cmd := exec.Command(bin, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	if out, errOut, err := asNobody("cat", "--store", st, "main:a.txt"); err != nil || out != "hello\n" {
		t.Fatalf("cat as another user: %v %q %s", err, out, errOut)
	}
	if _, errOut, err := asNobody("fs", "write", "--store", st, "main:b.txt"); err == nil || !strings.Contains(errOut, "read-only") {
		t.Fatalf("a write as another user: %v %s", err, errOut)
	}
	for _, suffix := range []string{"-shm", "-wal"} {
		if _, err := os.Stat(st + suffix); err == nil {
			t.Errorf("%s made by a reader", st+suffix)
		}
	}
}
