package main

import (
	"github.com/layerfs/layerfs"
)

func init() {
	registerFS(&command{
		name:    "mkdir",
		args:    "[REF:]PATH",
		summary: "create a directory and its missing parents",
		help: `Creates the directory PATH and any missing parents as one Commit. An existing
directory is up-to-date; an existing file there is an error (exit 4).` + "\n" + fsTargetHelp + "\n" + fsResultHelp,
		flags: addCallFlags,
		run:   runFSMkdir,
	})
}

func runFSMkdir(c *cli, args []string) error {
	if err := c.want(args, 1, 1); err != nil {
		return err
	}
	ref, path := splitTarget(args[0])
	if err := needPath(args[0], path); err != nil {
		return err
	}
	return mutate(c, ref, func(f *layerfs.FS, cl layerfs.Call) (*layerfs.Result, error) {
		return f.Mkdir(path, cl)
	})
}
