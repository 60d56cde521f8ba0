package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/sessions"
)

// toolsRepo makes the init source of the tools test: a git repository
// with one commit holding a Go module and a tiny npm project whose
// lockfile (testdata/npm) pins is-number@7.0.0.
func toolsRepo(t *testing.T) string {
	t.Helper()
	repo := filepath.Join(t.TempDir(), "repo")
	writeTree(t, repo, map[string]string{
		"go.mod":  "module example.com/tools\n\ngo 1.21\n",
		"main.go": "package main\n\nimport \"example.com/tools/greet\"\n\nfunc main() { println(greet.Hello(\"workspace\")) }\n",
		// A stamp unique to the run: go build compiles the module anew.
		"greet/greet.go": "package greet\n\n// Hello greets.\nfunc Hello(who string) string { return \"hello, \" + who }\n\nconst stamp = " +
			strconv.Quote(time.Now().String()) + "\n",
		".gitignore": "/app\n/node_modules/\n",
		"README.md":  "# tools\n",
	})
	for _, f := range []string{"package.json", "package-lock.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", "npm", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run(t, repo, gitEnv, "git", "init", "-q", "-b", "trunk")
	run(t, repo, gitEnv, "git", "add", "-A")
	run(t, repo, gitEnv, "git", "commit", "-q", "-m", "first")
	return repo
}

// gitEnv makes git independent of the host's configuration.
var gitEnv = []string{"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t",
	"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1"}

// TestWorkspaceTools runs git status, git commit, go build and npm install
// inside a Workspace, commits, and checks the branch head: the new git
// commit is in .git (git log, git fsck), the binary is there and runs,
// and node_modules holds is-number. The Workspace, following its commit,
// shows a clean git status over the new head.
func TestWorkspaceTools(t *testing.T) {
	repo := toolsRepo(t)
	d := startDaemonFrom(t, repo, sessions.Config{})
	w := d.create(t, "main")
	tmp := t.TempDir() // visible inside the Workspace's namespace too
	// The build cache lives in /tmp and outlives the run: a cold one costs
	// a compile of the runtime (10-25 s here) on the first run only. The
	// module's packages are new to it every run (see the stamp), so they
	// compile in the Workspace.
	gocache := filepath.Join(os.TempDir(), "layerfs-integration-gocache")
	env := append([]string{
		"PATH=" + filepath.Join(runtime.GOROOT(), "bin") + ":/usr/local/bin:/usr/bin:/bin",
		"HOME=" + filepath.Join(tmp, "home"),
		"GOCACHE=" + gocache, "GOPATH=" + filepath.Join(tmp, "gopath"),
		"GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "CGO_ENABLED=0",
		"npm_config_cache=" + filepath.Join(tmp, "npm-cache"), "npm_config_update_notifier=false",
	}, gitEnv...)
	sh := func(script string) string {
		t.Helper()
		res := d.exec(t, w.ID, env, "sh", "-ec", script)
		if res.ExitCode != 0 {
			t.Fatalf("%s: exit %d\n%s%s", script, res.ExitCode, res.Stdout, res.Stderr)
		}
		return string(res.StdoutBytes())
	}

	if out := sh("git status --porcelain"); out != "" {
		t.Fatalf("git status in a fresh Workspace:\n%s", out)
	}
	sh("echo 'more' >> README.md && mkdir -p docs && echo doc > docs/new.md")
	if out := sh("git status --porcelain"); out != " M README.md\n?? docs/\n" {
		t.Fatalf("git status after edits:\n%s", out)
	}
	sh("git add -A && git commit -q -m 'in a workspace'")
	sh("go build -o app . && ./app 2>&1 | grep -q 'hello, workspace'")
	if res := d.exec(t, w.ID, env, "npm", "install", "--no-audit", "--no-fund"); res.ExitCode != 0 {
		t.Fatalf("npm install: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	gitHead := strings.TrimSpace(sh("git rev-parse HEAD"))
	d.commit(t, w.ID, api.StatusCommitted)

	head := exportRef(t, d.st, "main")
	if got := strings.TrimSpace(run(t, head, gitEnv, "git", "log", "--format=%s")); got != "in a workspace\nfirst" {
		t.Errorf("git log of the committed head: %q", got)
	}
	if got := strings.TrimSpace(run(t, head, gitEnv, "git", "rev-parse", "HEAD")); got != gitHead {
		t.Errorf("git HEAD in the committed head is %s, want %s", got, gitHead)
	}
	run(t, head, gitEnv, "git", "fsck", "--no-dangling")
	if out := run(t, head, gitEnv, "git", "status", "--porcelain"); out != "" {
		t.Errorf("git status in the committed head:\n%s", out)
	}
	if out, err := exec.Command(filepath.Join(head, "app")).CombinedOutput(); err != nil || !strings.Contains(string(out), "hello, workspace") {
		t.Errorf("the committed binary: %v %s", err, out)
	}
	pkg, err := os.ReadFile(filepath.Join(head, "node_modules", "is-number", "package.json"))
	if err != nil || !strings.Contains(string(pkg), `"version": "7.0.0"`) {
		t.Errorf("node_modules/is-number in the committed head: %v %.200s", err, pkg)
	}
	if out := run(t, head, nil, "node", "-e", "process.stdout.write(String(require('is-number')(5)))"); out != "true" {
		t.Errorf("require('is-number') in the committed head: %q", out)
	}

	// The Workspace now shows the new head through FUSE: git sees the same
	// clean tree, the binary runs, node finds the package.
	if out := sh("git status --porcelain && git log -1 --format=%s && ./app 2>&1 && node -e \"require('is-number')\""); out != "in a workspace\nhello, workspace\n" {
		t.Errorf("the Workspace over its commit:\n%s", out)
	}
}
