package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Committing a one-file change in a Workspace of Go's tree (~15k files),
// against `git add -A && git commit` of the same change in a git checkout
// of the same tree, alternately in one run. The Workspace's commit is the
// socket call: capture of the upperdir, publish through the gate, and the
// remount onto the new head. Bar: under 10 ms; the ratio is reported.
//
// Every other round pauses 100 ms before the Workspace's commit
// ("settled"): the tight rounds commit right after the create and the
// command, so the daemon's work ahead of need that the create started (the
// next spare, the next namespace) runs beside the timed commit; after a
// command of a realistic length it is done. git's commit comes 50 ms
// after the Workspace has ended, so neither side's background work (the
// daemon's removals, git's writes) runs beside the other's timing; git's
// auto-gc is off.
//
//	go test -run '^$' -bench 'WorkspaceCommitGoTree' -benchtime 20x ./bench/
func BenchmarkWorkspaceCommitGoTree(b *testing.B) {
	wsNeedRoot(b)
	e := wsStart(b, wsPrivateCopy(b, wsGorootStore(b)))
	repo := wsGitCheckout(b, wsGoroot(b))
	const file = "src/fmt/print.go"
	git := func(script string) {
		cmd := exec.Command("sh", "-c", script)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=b", "GIT_AUTHOR_EMAIL=b@b", "GIT_COMMITTER_NAME=b", "GIT_COMMITTER_EMAIL=b@b")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%s: %v\n%s", script, err, out)
		}
	}
	git("git config gc.auto 0 && git status --porcelain >/dev/null") // no auto-gc; a fresh index
	var tight, settled, gitc samples
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		id := e.create(b).ID
		change := fmt.Sprintf("echo '// change %d' >> %s", i, file)
		e.sh(b, id, change)
		lfs := &tight
		if i%2 == 1 {
			lfs = &settled
			time.Sleep(100 * time.Millisecond)
		}
		b.StartTimer()
		lfs.time(func() { e.timedCommit(b, id) })
		b.StopTimer()
		e.end(b, id)
		git(change)
		time.Sleep(50 * time.Millisecond)
		b.StartTimer()
		gitc.time(func() { git("git add -A && git commit -q -m change") })
	}
	b.StopTimer()
	tight.report(b, "commit-ms")
	settled.report(b, "commit-settled-ms")
	gitc.report(b, "git-commit-ms")
	b.ReportMetric(gitc.ms()/tight.ms(), "git/layerfs")
	e.logPhases(b)
}

// wsGitCheckout is a kept git checkout of tree (one commit of all of it),
// built on first use; benchmarks commit to it, which does not change what
// they measure.
func wsGitCheckout(b *testing.B, tree string) string {
	b.Helper()
	dir := filepath.Join(benchDir(), "layerfs-bench-cache", "git-"+filepath.Base(tree))
	if _, err := os.Stat(filepath.Join(dir, ".ready")); err == nil {
		return filepath.Join(dir, "repo")
	}
	os.RemoveAll(dir)
	repo := filepath.Join(dir, "repo")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := wsCopyTree(tree, repo); err != nil {
		b.Fatal(err)
	}
	os.RemoveAll(filepath.Join(repo, ".git"))
	script := "git init -q && git add -A -f && git -c user.name=b -c user.email=b@b commit -q -m init"
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%s: %v\n%s", script, err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, ".ready"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
	return repo
}
