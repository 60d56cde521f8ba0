package main

import (
	"fmt"
	"io"

	"github.com/layerfs/layerfs"
)

func init() {
	registerFS(&command{
		name:    "write",
		args:    "[REF:]PATH < DATA",
		summary: "create or replace a file with stdin",
		help: `Reads stdin to its end and makes it the content of PATH on the branch, as one
Commit. Missing parent directories are created; an existing file keeps its
mode. Writing the content the file already has is up-to-date: no Commit.` + "\n" + fsTargetHelp + "\n" + fsResultHelp,
		flags: addCallFlags,
		run:   runFSWrite,
	})
}

func runFSWrite(c *cli, args []string) error {
	if err := c.want(args, 1, 1); err != nil {
		return err
	}
	ref, path := splitTarget(args[0])
	if err := needPath(args[0], path); err != nil {
		return err
	}
	data, err := io.ReadAll(stdin)
	if err != nil {
		return fmt.Errorf("read stdin: %w", err)
	}
	return mutate(c, ref, func(f *layerfs.FS, cl layerfs.Call) (*layerfs.Result, error) {
		return f.Write(path, data, cl)
	})
}
