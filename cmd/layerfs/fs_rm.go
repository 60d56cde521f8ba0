package main

import (
	"fmt"

	"github.com/layerfs/layerfs"
)

var rmFlags struct{ recursive bool }

func init() {
	registerFS(&command{
		name:    "rm",
		args:    "[REF:]PATH",
		summary: "delete a file, symlink or (with -r) a directory tree",
		help: `Deletes PATH as one Commit. A directory needs -r, and goes with everything
below it. A missing path is an error (exit 3).` + "\n" + fsTargetHelp + "\n" + fsResultHelp,
		flags: func(c *cli) {
			c.fs.BoolVar(&rmFlags.recursive, "r", false, "delete a directory and everything below it")
			addCallFlags(c)
		},
		run: runFSRm,
	})
}

func runFSRm(c *cli, args []string) error {
	if err := c.want(args, 1, 1); err != nil {
		return err
	}
	ref, path := splitTarget(args[0])
	if err := needPath(args[0], path); err != nil {
		return err
	}
	return mutate(c, ref, func(f *layerfs.FS, cl layerfs.Call) (*layerfs.Result, error) {
		if !rmFlags.recursive {
			if err := refuseDir(f, path); err != nil {
				return nil, err
			}
		}
		return f.Delete(path, cl)
	})
}

// refuseDir fails when path is a directory at the branch head.
func refuseDir(f *layerfs.FS, path string) error {
	fi, err := f.Stat(path)
	if err == nil && fi.Kind == "dir" {
		return fmt.Errorf("rm %s: %w (use -r to delete it and everything below it)", path, layerfs.ErrIsDir)
	}
	return nil
}
