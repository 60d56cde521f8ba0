package main

import (
	"flag"
	"fmt"

	"github.com/layerfs/layerfs"
)

var editFlags struct {
	old, new string
	all      bool
}

func init() {
	registerFS(&command{
		name:    "edit",
		args:    "[REF:]PATH --old TEXT --new TEXT",
		summary: "replace exact text in a text file",
		help: `Replaces --old with --new in a text file, as agents' edit tools do: --old must
occur exactly once, or with --all at least once. Otherwise nothing changes
and the error says how many times it occurred (exit 3 when not found, 4 when
it occurs more than once). --new may be empty (--new '') to delete the text.` + "\n" + fsTargetHelp + "\n" + fsResultHelp,
		flags: func(c *cli) {
			c.fs.StringVar(&editFlags.old, "old", "", "the exact `TEXT` to replace")
			c.fs.StringVar(&editFlags.new, "new", "", "the `TEXT` to put in its place")
			c.fs.BoolVar(&editFlags.all, "all", false, "replace every occurrence")
			addCallFlags(c)
		},
		run: runFSEdit,
	})
}

func runFSEdit(c *cli, args []string) error {
	if err := c.want(args, 1, 1); err != nil {
		return err
	}
	if !given(c, "old") || !given(c, "new") {
		return fmt.Errorf("%w: give --old TEXT and --new TEXT (--new '' deletes)", errUsage)
	}
	ref, path := splitTarget(args[0])
	if err := needPath(args[0], path); err != nil {
		return err
	}
	return mutate(c, ref, func(f *layerfs.FS, cl layerfs.Call) (*layerfs.Result, error) {
		return f.Edit(path, editFlags.old, editFlags.new, editFlags.all, cl)
	})
}

// given reports whether a flag was set on the command line.
func given(c *cli, name string) bool {
	set := false
	c.fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
