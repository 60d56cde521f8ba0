package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/layerfs/layerfs/sessions"
)

var daemonFlags struct {
	socket, stateDir string
	max              int
}

func init() {
	register(&command{
		name:    "daemon",
		args:    "",
		summary: "serve Workspaces of the Store over a unix socket",
		help: `Runs in the foreground. Mounts the Store once with FUSE (every Commit by id)
under the state directory, and serves Workspaces — overlayfs over that mount
with a private upperdir, entered through a private mount namespace — over an
HTTP/JSON API on the unix socket (see README). Needs root, /dev/fuse and
overlayfs.

On SIGINT or SIGTERM it unmounts everything and exits; Workspaces stay
recorded in the state directory and come back, with their uncommitted
changes, when the daemon starts again — also after a crash.`,
		flags: func(c *cli) {
			c.fs.StringVar(&daemonFlags.stateDir, "state-dir", "/var/lib/layerfs", "`DIR` for mounts, upperdirs and Workspace records (local disk)")
			c.fs.StringVar(&daemonFlags.socket, "socket", os.Getenv("LAYERFS_SOCKET"), "unix socket `PATH` (default $LAYERFS_SOCKET, else STATE-DIR/daemon.sock)")
			c.fs.IntVar(&daemonFlags.max, "max-workspaces", sessions.DefaultMaxWorkspaces, "cap on live Workspaces")
		},
		run: runDaemon,
	})
}

func runDaemon(c *cli, args []string) error {
	if err := c.want(args, 0, 0); err != nil {
		return err
	}
	st, err := c.open(false)
	if err != nil {
		return err
	}
	socket := daemonFlags.socket
	if socket == "" {
		socket = filepath.Join(daemonFlags.stateDir, "daemon.sock")
	}
	l, err := sessions.Listen(socket)
	if err != nil {
		return err
	}
	defer os.Remove(socket)
	d, err := sessions.Start(sessions.Config{Store: st.Backend(), StateDir: daemonFlags.stateDir, MaxWorkspaces: daemonFlags.max})
	if err != nil {
		l.Close()
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(c.errOut, "layerfs daemon: serving %s on %s (state in %s)\n", st.Backend().Path(), socket, daemonFlags.stateDir)
	serveErr := d.Serve(ctx, l)
	if err := d.Close(); err != nil {
		return err
	}
	return serveErr
}
