package integration

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/sessions"
)

// TestCommitRefusedWhileProcessesRun: a process left running in the
// Workspace would write into the view the commit leaves behind, so the
// commit is refused unless allowed; exec itself returns although the
// process keeps its output open.
func TestCommitRefusedWhileProcessesRun(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{})
	w := d.create(t, "main")
	start := time.Now()
	res, err := d.Exec(context.Background(), w.ID, api.ExecRequest{Argv: []string{"sh", "-c", "echo x > a.txt; sleep 300 & echo started"}}, nil)
	if err != nil || res.ExitCode != 0 || !strings.Contains(res.Stdout, "started") {
		t.Fatalf("exec with a background process: %+v %v", res, err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("exec waited %v for the background process's output", took)
	}
	_, err = d.Commit(w.ID, api.CommitRequest{})
	if !errors.Is(err, sessions.ErrRunning) {
		t.Fatalf("commit with a process running: %v", err)
	}
	if got := d.read(t, "main", "a.txt"); got != "a\n" {
		t.Fatalf("a refused commit wrote %q", got)
	}
	res2, err := d.Commit(w.ID, api.CommitRequest{AllowRunning: true})
	if err != nil || res2.Status != api.StatusCommitted {
		t.Fatalf("commit allowing running processes: %+v %v", res2, err)
	}
	if err := d.End(w.ID, true); err != nil { // ends the sleep too
		t.Fatal(err)
	}
}
