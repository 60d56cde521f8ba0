package main

import (
	"fmt"

	"github.com/layerfs/layerfs"
)

func init() {
	registerFS(&command{
		name:    "mv",
		args:    "[REF:]FROM [REF:]TO",
		summary: "rename a file or directory",
		help: `Moves FROM to TO on one branch as one Commit; TO must not exist (exit 4 when
it does). Line owners (blame) move with the content.` + "\n" + fsTargetHelp + "\n" + fsResultHelp,
		flags: addCallFlags,
		run:   runFSMv,
	})
}

func runFSMv(c *cli, args []string) error {
	if err := c.want(args, 2, 2); err != nil {
		return err
	}
	ref, from := splitTarget(args[0])
	ref2, to := splitTarget(args[1])
	for i, p := range []string{from, to} {
		if err := needPath(args[i], p); err != nil {
			return err
		}
	}
	if ref2 != ref {
		return fmt.Errorf("%w: mv works within one branch: %s and %s", errUsage, ref, ref2)
	}
	return mutate(c, ref, func(f *layerfs.FS, cl layerfs.Call) (*layerfs.Result, error) {
		return f.Move(from, to, cl)
	})
}
