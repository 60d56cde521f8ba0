package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMountGitCheckout captures a git checkout (init takes .git too),
// mounts its Commit and runs git status and git log inside the mount: the
// tree is clean and the history is all there. git cannot refresh its index
// on a read-only mount, so status compares every file's content; with
// GIT_OPTIONAL_LOCKS=0 it does not even try to write.
func TestMountGitCheckout(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "repo")
	gitEnv := []string{"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1"}
	os.Mkdir(repo, 0o755)
	run(t, repo, gitEnv, "git", "init", "-q", "-b", "trunk")
	commits := []map[string]string{
		{"README.md": "# demo\n", "src/main.go": "package main\n\nfunc main() {}\n"},
		{"src/util/util.go": "package util\n", "docs/link.md": "->../README.md"},
		{"README.md": "# demo\n\nmore\n", "bin/run.sh": "#!/bin/sh\necho hi\n"},
	}
	for i, files := range commits {
		writeTree(t, repo, files)
		os.Chmod(filepath.Join(repo, "bin/run.sh"), 0o755)
		run(t, repo, gitEnv, "git", "add", "-A")
		run(t, repo, gitEnv, "git", "commit", "-q", "-m", "commit "+string(rune('1'+i)))
	}
	os.WriteFile(filepath.Join(repo, ".gitignore"), []byte("*.log\n"), 0o644)
	os.WriteFile(filepath.Join(repo, "build.log"), []byte("ignored, captured anyway\n"), 0o644)
	run(t, repo, gitEnv, "git", "add", ".gitignore")
	run(t, repo, gitEnv, "git", "commit", "-q", "-m", "ignore logs")

	mnt := mountStore(t, initStore(t, repo), "main")
	for _, env := range [][]string{{"GIT_OPTIONAL_LOCKS=0"}, nil} {
		if out := run(t, mnt, append(gitEnv, env...), "git", "status", "--porcelain"); out != "" {
			t.Errorf("git status (%v) in the mount is not clean:\n%s", env, out)
		}
	}
	log := run(t, mnt, gitEnv, "git", "log", "--format=%s")
	if want := "ignore logs\ncommit 3\ncommit 2\ncommit 1\n"; log != want {
		t.Errorf("git log = %q, want %q", log, want)
	}
	if out := run(t, mnt, gitEnv, "git", "status", "--porcelain", "--ignored"); !strings.Contains(out, "!! build.log") {
		t.Errorf("the ignored file is not in the mount: %q", out)
	}
	run(t, mnt, gitEnv, "git", "fsck", "--no-dangling")
}
