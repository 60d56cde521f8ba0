package main

import (
	"errors"
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/fusefs"
	"github.com/layerfs/layerfs/store"
)

var umountFlags struct {
	lazy bool
}

func init() {
	register(&command{
		name:    "umount",
		noStore: true,
		args:    "MOUNTPOINT",
		summary: "unmount a layerfs mount",
		help: `Unmounts the layerfs mount at MOUNTPOINT; its server then exits. A mount
still in use fails (exit 4) with "device or resource busy" unless --lazy, which
detaches it at once and lets it go when its last user does.`,
		flags: func(c *cli) {
			c.fs.BoolVar(&umountFlags.lazy, "lazy", false, "detach now, even while in use")
		},
		run: runUmount,
	})
}

func runUmount(c *cli, args []string) error {
	if err := c.want(args, 1, 1); err != nil {
		return err
	}
	err := fusefs.Unmount(args[0], umountFlags.lazy)
	if errors.Is(err, fusefs.ErrNotMounted) {
		// Perhaps a symlink to the mount point. Resolved only now: a
		// stat of a mount point asks its server, which may be stuck.
		if real, rerr := filepath.EvalSymlinks(args[0]); rerr == nil && real != args[0] {
			err = fusefs.Unmount(real, umountFlags.lazy)
		}
	}
	switch {
	case errors.Is(err, fusefs.ErrNotMounted):
		return fmt.Errorf("%w: %w", store.ErrNotFound, err)
	case errors.Is(err, unix.EBUSY): // in use: exit 4, as other refusals for that
		return fmt.Errorf("%w: %w (--lazy detaches it now)", store.ErrInUse, err)
	}
	return err
}
