package integration

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/sessions"
)

// TestExecLooksInTheRequestsPath: exec looks a program named without a
// slash up in the PATH of the environment the request gives, as the
// command's shell would (sh -c NAME did), not in the daemon's: a tool in
// the Workspace's bin/ was "not found", and a PATH without /bin still ran
// ls.
func TestExecLooksInTheRequestsPath(t *testing.T) {
	d := startDaemon(t, map[string]string{"bin/mytool": "#!/bin/sh\necho mytool ran\n"}, sessions.Config{Volume: sessions.VolumeOff})
	w := d.create(t, "main")
	d.sh(t, w.ID, "chmod +x bin/mytool")
	ctx := context.Background()
	env := []string{"PATH=/nowhere:" + w.Path + "/bin:/usr/bin:/bin"}
	res, err := d.Exec(ctx, w.ID, api.ExecRequest{Argv: []string{"mytool"}, Env: env}, nil)
	if err != nil || res.ExitCode != 0 || res.Stdout != "mytool ran\n" {
		t.Fatalf("mytool with the Workspace's bin/ on PATH: %+v %v", res, err)
	}
	_, err = d.Exec(ctx, w.ID, api.ExecRequest{Argv: []string{"ls"}, Env: []string{"PATH=/nowhere"}}, nil)
	if !errors.Is(err, sessions.ErrNoCommand) {
		t.Fatalf("ls with PATH=/nowhere: %v, want %v", err, sessions.ErrNoCommand)
	}
	// No PATH given: the daemon's; a path: itself.
	for _, req := range []api.ExecRequest{{Argv: []string{"echo", "x"}, Env: []string{"A=1"}}, {Argv: []string{"/bin/echo", "x"}, Env: env}, {Argv: []string{"./bin/mytool"}, Env: env}} {
		res, err := d.Exec(ctx, w.ID, req, nil)
		if err != nil || res.ExitCode != 0 || strings.TrimSpace(res.Stdout) == "" {
			t.Fatalf("%v: %+v %v", req.Argv, res, err)
		}
	}
}
