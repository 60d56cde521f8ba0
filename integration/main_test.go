package integration

import (
	"bufio"
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
	if why := missingPrivileges(); why != "" {
		if os.Getenv("LAYERFS_REQUIRE_ROOT") == "1" {
			fmt.Fprintf(os.Stderr, "integration: LAYERFS_REQUIRE_ROOT=1 but %s\n", why)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "integration: skipping: %s\n", why)
		os.Exit(0)
	}
	before := leftoverMounts()
	dir, err := os.MkdirTemp("", "layerfs-integration")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	layerfsBin = filepath.Join(dir, "layerfs")
	if out, err := exec.Command("go", "build", "-o", dir, "github.com/layerfs/layerfs/cmd/...").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build layerfs: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if left := newMounts(before, leftoverMounts()); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "integration: tests left mounts behind:\n%s\n", strings.Join(left, "\n"))
		code = 1
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

// leftoverMounts lists mounts a LayerFS test could have made.
func leftoverMounts() []string {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 || fields[1] == "/" {
			continue
		}
		if strings.HasPrefix(fields[2], "fuse.layerfs") || fields[2] == "overlay" || strings.Contains(fields[1], "layerfs") {
			out = append(out, sc.Text())
		}
	}
	return out
}

func newMounts(before, after []string) []string {
	seen := map[string]bool{}
	for _, m := range before {
		seen[m] = true
	}
	var out []string
	for _, m := range after {
		if !seen[m] {
			out = append(out, m)
		}
	}
	return out
}
