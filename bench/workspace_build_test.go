package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/layerfs/layerfs/api"
)

// A real build in a Workspace: `go build ./...` of this project (its
// committed tree, from git archive HEAD) with an empty build cache inside
// the Workspace, against the same build in a plain copy on the same ext4
// disk, alternately in one run. Both use the host's module cache
// (GOFLAGS=-mod=mod, GOPROXY=off: nothing is downloaded). Bar: the
// Workspace within 1.3x of ext4.
//
//	go test -run '^$' -bench 'WorkspaceGoBuild' -benchtime 3x -timeout 60m ./bench/
func BenchmarkWorkspaceGoBuild(b *testing.B) {
	wsNeedRoot(b)
	src := filepath.Join(wsTempDir(b), "src")
	if out, err := exec.Command("sh", "-c", "mkdir -p "+src+" && git -C .. archive HEAD | tar x -C "+src).CombinedOutput(); err != nil {
		b.Fatalf("git archive: %v\n%s", err, out)
	}
	e := wsStart(b, wsStoreOfDir(b, src))
	modcache := wsGoEnv(b, "GOMODCACHE")
	env := func(gocache string) []string {
		return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "GOCACHE=" + gocache,
			"GOMODCACHE=" + modcache, "GOFLAGS=-mod=mod", "GOPROXY=off", "GOTOOLCHAIN=local", "GOTELEMETRY=off"}
	}
	var ws, ext4 samples
	buildExt4 := func() {
		dir := filepath.Join(wsTempDir(b), "src")
		if err := wsCopyTree(src, dir); err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command("go", "build", "./...")
		cmd.Dir, cmd.Env = dir, env(filepath.Join(dir, ".gocache"))
		ext4.time(func() {
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("go build on ext4: %v\n%s", err, out)
			}
		})
		os.RemoveAll(filepath.Dir(dir))
	}
	buildWorkspace := func() {
		id := e.create(b).ID
		req := api.ExecRequest{Argv: []string{"go", "build", "./..."}, Env: env(api.DefaultPath + "/.gocache"),
			TimeoutMS: (30 * time.Minute).Milliseconds()}
		ws.time(func() {
			res, err := e.c.Exec(context.Background(), id, req)
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("go build in a Workspace: %v, exit %d\n%s%s", err, res.ExitCode, res.Stdout, res.Stderr)
			}
		})
		if err := e.c.End(context.Background(), id, true); err != nil {
			b.Fatal(err)
		}
		e.waitRemoved(b, id) // as the ext4 side removes its copy before going on
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			buildExt4()
			buildWorkspace()
		} else {
			buildWorkspace()
			buildExt4()
		}
	}
	b.StopTimer()
	b.ReportMetric(ws.ms()/1000, "workspace-s")
	b.ReportMetric(ext4.ms()/1000, "ext4-s")
	b.ReportMetric(ws.ms()/ext4.ms(), "workspace/ext4")
}

func wsGoEnv(b *testing.B, key string) string {
	out, err := exec.Command("go", "env", key).Output()
	if err != nil {
		b.Fatalf("go env %s: %v", key, err)
	}
	return strings.TrimSpace(string(out))
}
