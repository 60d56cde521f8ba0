package main

import (
	"fmt"

	"github.com/layerfs/layerfs/store"
)

func init() {
	register(&command{
		name:    "fsck",
		args:    "",
		summary: "verify every object reachable from a branch or layer",
		help: `Reads every object reachable from every branch and layer, checks that it
decodes and hashes to its id, and reports missing (dangling) and corrupt
objects. Exit status 0 means the Store is sound, 5 that it is not.`,
		flags: func(c *cli) { c.jsonFlag() },
		run:   runFsck,
	})
}

func runFsck(c *cli, args []string) error {
	if err := c.want(args, 0, 0); err != nil {
		return err
	}
	st, err := c.open(false)
	if err != nil {
		return err
	}
	rep, err := st.Backend().Fsck()
	if err != nil {
		return err
	}
	if c.json {
		if rep.Problems == nil {
			rep.Problems = []store.Problem{} // "problems": [], not null
		}
		if err := c.printJSON(rep); err != nil {
			return err
		}
	} else {
		for _, p := range rep.Problems {
			fmt.Fprintln(c.out, p)
		}
		fmt.Fprintln(c.out, rep.Summary())
	}
	if !rep.OK() {
		return errUnsound
	}
	return nil
}
