package integration

import (
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"testing"
)

// TestMountGoTreeRoundTrip captures Go's whole source tree (GOROOT, about
// 15,000 files), mounts it and compares: diff -r finds no difference in
// contents, and find reports the same modes, sizes, types, link targets,
// owners and mtimes for every path. Directory sizes are left out: trees do
// not store them (the mount shows 4096), and neither is the root's mtime.
func TestMountGoTreeRoundTrip(t *testing.T) {
	src := runtime.GOROOT()
	mnt := mountStore(t, initStore(t, src), "main")
	if out, err := exec.Command("diff", "-r", "--no-dereference", src, mnt).CombinedOutput(); err != nil {
		t.Fatalf("diff -r %s %s: %v\n%.2000s", src, mnt, err, out)
	}
	want, got := listTree(t, src), listTree(t, mnt)
	if len(want) < 10000 {
		t.Fatalf("%s lists %d paths: not Go's tree?", src, len(want))
	}
	if len(want) != len(got) {
		t.Errorf("find lists %d paths in the source, %d in the mount", len(want), len(got))
	}
	for i := range min(len(want), len(got)) {
		if want[i] != got[i] {
			t.Fatalf("first difference:\nsource: %s\nmount:  %s", want[i], got[i])
		}
	}
}

// listTree lists every path below dir with find: path, mode, size (not
// for directories), type, link target, owner, group and mtime, sorted.
func listTree(t *testing.T, dir string) []string {
	t.Helper()
	out, err := exec.Command("find", dir, "-mindepth", "1", "-printf", `%P\t%m\t%s\t%y\t%l\t%U\t%G\t%T@\n`).Output()
	if err != nil {
		t.Fatalf("find %s: %v", dir, err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	for i, l := range lines {
		f := strings.Split(l, "\t")
		if f[3] == "d" {
			f[2] = "-"
		}
		lines[i] = strings.Join(f, " ")
	}
	sort.Strings(lines)
	return lines
}
