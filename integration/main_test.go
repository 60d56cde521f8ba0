package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// layerfsBin is the CLI built once for the suite.
var layerfsBin string

func TestMain(m *testing.M) {
	if dir := os.Getenv(wedgeEnv); dir != "" {
		os.Exit(wedgeMain(dir)) // the test binary as a daemon stuck on its own mount
	}
	if at := os.Getenv(crashEnv); at != "" {
		os.Exit(crashingDaemonMain(at, os.Args[1:])) // the test binary as a daemon that dies at a failpoint
	}
	if why := missingPrivileges(); why != "" {
		if os.Getenv("LAYERFS_REQUIRE_ROOT") == "1" {
			fmt.Fprintf(os.Stderr, "integration: LAYERFS_REQUIRE_ROOT=1 but %s\n", why)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "integration: skipping: %s\n", why)
		os.Exit(0)
	}
	// Everything the tests make lives under one root of this run's own, so
	// the check for mounts left behind sees only this run's, not those of
	// another test run or daemon on the machine.
	root, err := os.MkdirTemp("", "layerfs-integration")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("TMPDIR", root)
	dir := filepath.Join(root, "bin")
	if err := os.Mkdir(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	layerfsBin = filepath.Join(dir, "layerfs")
	if out, err := exec.Command("go", "build", "-o", dir, "github.com/layerfs/layerfs/cmd/...").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build layerfs: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	if left := mountsUnder(root); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "integration: tests left mounts behind:\n%s\n", strings.Join(left, "\n"))
		code = 1
	} else {
		os.RemoveAll(root)
	}
	os.Exit(code)
}

// missingPrivileges says why the suite cannot run here, or "" if it can.
func missingPrivileges() string {
	switch {
	case runtime.GOOS != "linux":
		return "not Linux"
	case os.Geteuid() != 0:
		return "not root"
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return "no /dev/fuse"
	}
	fss, err := os.ReadFile("/proc/filesystems")
	if err != nil || !strings.Contains(string(fss), "overlay") || !strings.Contains(string(fss), "fuse") {
		return "kernel lacks overlayfs or fuse"
	}
	return ""
}
