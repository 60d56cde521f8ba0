package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// mountOverlay stacks a kernel overlayfs with lowerdir lower and a fresh
// upperdir, as a Workspace does, and returns the merged directory. It is
// unmounted when the test ends, before the mounts below it.
func mountOverlay(t *testing.T, lower string) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"upper", "work", "merged"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	merged := filepath.Join(dir, "merged")
	opts := "lowerdir=" + lower + ",upperdir=" + filepath.Join(dir, "upper") + ",workdir=" + filepath.Join(dir, "work")
	if err := unix.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		t.Fatalf("mount overlay on %s: %v", lower, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(merged, 0); err != nil {
			t.Errorf("unmount overlay: %v", err)
			unix.Unmount(merged, unix.MNT_DETACH)
		}
	})
	return merged
}

// TestMountOverlayGoBuild builds and runs a small Go module in an overlay
// whose lower layer is the mount: the lower supports what overlayfs and a
// compiler need, and writes land in the upperdir. (The module avoids fmt
// and tests: with an empty GOCACHE they would compile half the standard
// library.)
func TestMountOverlayGoBuild(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, map[string]string{
		"go.mod":         "module example.com/demo\n\ngo 1.21\n",
		"main.go":        "package main\n\nimport \"example.com/demo/greet\"\n\nfunc main() { println(greet.Hello(\"layerfs\")) }\n",
		"greet/greet.go": "package greet\n\n// Hello greets.\nfunc Hello(who string) string { return \"hello, \" + who }\n",
	})
	mnt := mountStore(t, initStore(t, src), "main")
	ws := mountOverlay(t, mnt)
	cache := t.TempDir()
	env := []string{"GOCACHE=" + cache + "/build", "GOPATH=" + cache + "/path", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "CGO_ENABLED=0"}
	run(t, ws, env, "go", "build", "./...")
	run(t, ws, env, "go", "build", "-o", "demo", ".")
	if out := run(t, ws, nil, filepath.Join(ws, "demo")); out != "hello, layerfs\n" {
		t.Errorf("demo printed %q", out)
	}
	os.WriteFile(filepath.Join(ws, "greet", "greet.go"), []byte("package greet\n\nfunc Hello(who string) string { return \"hi \" + who }\n"), 0o644)
	run(t, ws, env, "go", "build", "-o", "demo", ".")
	if out := run(t, ws, nil, filepath.Join(ws, "demo")); !strings.HasPrefix(out, "hi layerfs") {
		t.Errorf("after an edit, demo printed %q", out)
	}
	if got, _ := os.ReadFile(filepath.Join(mnt, "greet", "greet.go")); !strings.Contains(string(got), "hello, ") {
		t.Error("the edit reached the lower layer")
	}
}
