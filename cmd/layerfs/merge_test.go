package main

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestCLIMergePublishSquash(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.layerfs")
	mustRun(t, "init", "--store", store, testTree(t))
	t.Setenv("LAYERFS_STORE", store)
	mustRun(t, "branch", "fork", "feat", "main")
	mustStdin(t, "one\n", "fs", "write", "feat:a.txt")
	if out := mustRun(t, "publish", "feat"); !strings.Contains(out, "fast-forward main") || !strings.Contains(out, "L000002") {
		t.Errorf("publish: %q", out)
	}
	mustStdin(t, "two\n", "fs", "write", "feat:b.txt")
	mustStdin(t, "three\n", "fs", "write", "main:c.txt")
	if out := mustRun(t, "merge", "main", "feat"); !strings.Contains(out, "merged into main") {
		t.Errorf("merge: %q", out)
	}
	if out := mustRun(t, "layers"); strings.Count(out, "\n") != 4 {
		t.Errorf("layers:\n%s", out)
	}
	if out := mustRun(t, "squash", "L2", "L4"); !strings.Contains(out, "into L000004") {
		t.Errorf("squash: %q", out)
	}
	if out := mustRun(t, "layers"); strings.Count(out, "\n") != 2 {
		t.Errorf("layers after squash:\n%s", out)
	}
	if code, _, stderr := runCLI(t, "squash", "L4", "L2"); code != exitUsage || !strings.Contains(stderr, "squash") {
		t.Errorf("bad squash: %d %s", code, stderr)
	}
	mustStdin(t, "feat's\n", "fs", "write", "feat:c.txt")
	mustStdin(t, "main's\n", "fs", "write", "main:c.txt")
	if code, _, stderr := runCLI(t, "merge", "main", "feat"); code != exitConflict || !strings.Contains(stderr, "c.txt") {
		t.Errorf("conflicting merge: %d %s", code, stderr)
	}
}

func mustStdin(t *testing.T, input string, args ...string) {
	t.Helper()
	if code, _, stderr := runWithStdin(t, input, args...); code != 0 {
		t.Fatalf("layerfs %s: exit %d: %s", strings.Join(args, " "), code, stderr)
	}
}
