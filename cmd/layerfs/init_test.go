package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestCLIHelperProcess is not a test of its own: the tests that need the
// CLI in processes of its own run the test binary through it.
func TestCLIHelperProcess(t *testing.T) {
	if os.Getenv("LAYERFS_TEST_CLI") == "" {
		t.Skip("the CLI for tests that run it as a process")
	}
	os.Exit(run(flag.Args(), os.Stdout, os.Stderr))
}

// TestCLIConcurrentInitsKeepTheStore: two inits of a new Store started at
// once. One lands; the other, which had also found no file, fails — and
// once removed, as the Store it had made, the file the first had just
// filled: an init that reported success left no Store.
func TestCLIConcurrentInitsKeepTheStore(t *testing.T) {
	src, dir := testTree(t), t.TempDir()
	for round := 0; round < 10; round++ {
		st := filepath.Join(dir, fmt.Sprintf("s%d.layerfs", round))
		var cmds []*exec.Cmd
		for i := 0; i < 2; i++ {
			cmd := exec.Command(os.Args[0], "-test.run=^TestCLIHelperProcess$", "--", "init", "--store", st, src)
			cmd.Env = append(os.Environ(), "LAYERFS_TEST_CLI=1")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds = append(cmds, cmd)
		}
		landed := 0
		for _, cmd := range cmds {
			if cmd.Wait() == nil {
				landed++
			}
		}
		if landed != 1 {
			t.Fatalf("round %d: %d inits succeeded, want 1", round, landed)
		}
		if code, _, stderr := runCLI(t, "log", "--store", st, "main"); code != 0 {
			t.Fatalf("round %d: an init succeeded, but: exit %d %s", round, code, stderr)
		}
	}
}
