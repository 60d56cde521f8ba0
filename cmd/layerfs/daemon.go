package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/layerfs/layerfs/sessions"
)

var daemonFlags struct {
	socket, stateDir string
	max              int
	volume           string
	volumeGiB        int
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
changes, when the daemon starts again — also after a crash.

Upperdirs go on a filesystem that clones files (XFS with reflink, btrfs),
so that a Workspace's first write to a big file copies it up by cloning
rather than copying: the state directory's own filesystem if it clones;
otherwise an XFS image, STATE-DIR/ws.img, of --volume-size GiB allocated
when first made (needs mkfs.xfs, from xfsprogs) and mounted through a loop
device at STATE-DIR/ws. Big files committed from Workspaces are kept there
as data files, up to a quarter of the volume, for later Workspaces to
clone. --volume=off keeps upperdirs on the state directory's filesystem
as it is; so does a state directory on tmpfs, or no mkfs.xfs.`,
		flags: func(c *cli) {
			c.fs.StringVar(&daemonFlags.stateDir, "state-dir", "/var/lib/layerfs", "`DIR` for mounts, upperdirs and Workspace records (local disk)")
			c.fs.StringVar(&daemonFlags.socket, "socket", os.Getenv("LAYERFS_SOCKET"), "unix socket `PATH` (default $LAYERFS_SOCKET, else STATE-DIR/daemon.sock)")
			c.fs.IntVar(&daemonFlags.max, "max-workspaces", sessions.DefaultMaxWorkspaces, "cap on live Workspaces")
			c.fs.StringVar(&daemonFlags.volume, "volume", "auto", "where upperdirs go: `auto` (a filesystem that clones, see above) or off")
			c.fs.IntVar(&daemonFlags.volumeGiB, "volume-size", 0, "size in `GiB` of the XFS image made for upperdirs (default 16, or a quarter of the free space if less); an existing image keeps its size")
		},
		run: runDaemon,
	})
}

func runDaemon(c *cli, args []string) error {
	if err := c.want(args, 0, 0); err != nil {
		return err
	}
	if daemonFlags.max <= 0 {
		return fmt.Errorf("%w: --max-workspaces %d: want 1 or more", errUsage, daemonFlags.max)
	}
	if given(c, "volume-size") && daemonFlags.volumeGiB <= 0 {
		return fmt.Errorf("%w: --volume-size %d: want 1 GiB or more (leave it out for the default)", errUsage, daemonFlags.volumeGiB)
	}
	// A daemon killed while waiting on its own FUSE mount can be stuck
	// dying, holding the Store's locks: free it before opening the Store.
	if err := sessions.RescueWedged(daemonFlags.stateDir, log.New(c.errOut, "layerfs daemon: ", log.LstdFlags)); err != nil {
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
	volume := daemonFlags.volume
	switch volume {
	case "auto":
		volume = sessions.VolumeAuto
	case sessions.VolumeOff:
	default:
		l.Close()
		return fmt.Errorf("%w: --volume %q: want auto or off", errUsage, daemonFlags.volume)
	}
	d, err := sessions.Start(sessions.Config{Store: st.Backend(), StateDir: daemonFlags.stateDir, MaxWorkspaces: daemonFlags.max,
		Volume: volume, VolumeSize: int64(daemonFlags.volumeGiB) << 30})
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
