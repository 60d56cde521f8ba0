package main

import (
	"fmt"
)

func init() {
	register(&command{
		name:    "reset",
		args:    "BRANCH REF",
		summary: "move a branch to the commit a ref names",
		help: `Points BRANCH at the commit REF names (a checkpoint: any commit id or prefix,
layer, branch, with ~N). Commits after it stay in the Store and stay
reachable by id, so a reset can be undone by resetting to the old head,
which this prints. Resetting main appends a Layer.`,
		flags: func(c *cli) { c.jsonFlag() },
		run:   runReset,
	})
}

type resetJSON struct {
	Branch   string `json:"branch"`
	Head     string `json:"head"`
	Previous string `json:"previous"`
}

func runReset(c *cli, args []string) error {
	if err := c.want(args, 2, 2); err != nil {
		return err
	}
	st, err := c.open(false)
	if err != nil {
		return err
	}
	before, err := st.Backend().Branch(args[0])
	if err != nil {
		return err
	}
	head, err := st.Reset(args[0], args[1])
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(resetJSON{args[0], head.String(), before.Head.String()})
	}
	fmt.Fprintf(c.out, "%s is at %s (was %s)\n", args[0], head.Short(), before.Head.Short())
	return nil
}
