package main

import (
	"errors"
	"fmt"

	"github.com/layerfs/layerfs/fusefs"
	"github.com/layerfs/layerfs/store"
)

var mountFlags struct {
	foreground bool
	allCommits bool
	options    string
	log        string
}

func init() {
	register(&command{
		name:    "mount",
		args:    "REF MOUNTPOINT | --all-commits MOUNTPOINT",
		summary: "mount a ref's tree read-only (FUSE)",
		help: `Mounts the tree REF names — a branch (pinned to its head at mount time), a
layer or a commit — read-only at MOUNTPOINT, and returns once the mount is
ready; a background server keeps serving it until layerfs umount. With
--all-commits, MOUNTPOINT/<commit-id>/ is any Commit's tree and
MOUNTPOINT/branches/<name> is a symlink to a branch's head, following it
as it moves (checked at most every branch_timeout).

A stale mount left at MOUNTPOINT by a server that died is cleaned first;
a live one is refused (exit 4), also when two mounts race for the same
MOUNTPOINT. With --foreground the server runs in this process and unmounts
on SIGINT, SIGTERM or SIGHUP. Without it, such a signal before the mount
is ready stops the server too: nothing stays mounted, and layerfs mount
exits 128+N (130 for SIGINT). A signal ignored when layerfs mount starts
(nohup's SIGHUP, a script's background job's SIGINT) stays ignored.

-o takes mount options, comma-separated: cache_size=SIZE (chunk cache,
default 128M), readahead=SIZE (0 turns it off; default 8M),
entry_timeout=DURATION (default 24h), branch_timeout=DURATION (default
1s; 0 for either: no caching), noallow_other, suid, dev, exec, debug,
log=FILE.`,
		flags: func(c *cli) {
			c.fs.BoolVar(&mountFlags.foreground, "foreground", false, "serve in this process until unmounted or signalled")
			c.fs.BoolVar(&mountFlags.allCommits, "all-commits", false, "mount every Commit and branches/ instead of one ref")
			c.fs.StringVar(&mountFlags.options, "o", "", "mount `OPTIONS`, comma-separated")
			c.fs.StringVar(&mountFlags.log, "log", "", "log to `FILE` instead of standard error")
		},
		run: runMount,
	})
}

func runMount(c *cli, args []string) error {
	want := 2
	if mountFlags.allCommits {
		want = 1
	}
	if err := c.want(args, want, want); err != nil {
		return err
	}
	if c.storePath == "" {
		return fmt.Errorf("%w: no Store: pass --store FILE or set LAYERFS_STORE", errUsage)
	}
	opts, err := fusefs.ParseOptions(mountFlags.options)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	opts.AllCommits = opts.AllCommits || mountFlags.allCommits
	if mountFlags.log != "" {
		opts.Log = mountFlags.log
	}
	req := fusefs.Request{StorePath: c.storePath, Mountpoint: args[len(args)-1], Options: opts,
		Foreground: mountFlags.foreground, Stderr: c.errOut}
	if !mountFlags.allCommits {
		req.Ref = args[0]
	}
	err = fusefs.Run(req)
	if errors.Is(err, fusefs.ErrMounted) {
		return fmt.Errorf("%w: %w", store.ErrExists, err)
	}
	return err
}
