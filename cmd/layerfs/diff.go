package main

import (
	"fmt"
)

var diffFlags struct {
	stat    bool
	context int
}

func init() {
	register(&command{
		name:    "diff",
		args:    "A B [PATH...]",
		summary: "show what changed from ref A to ref B",
		help: `Prints unified diffs of the text files that differ from A to B (binary files
are named, not shown). --stat lists the changed paths with their kind
(added, modified, deleted, type-changed) and a count instead. --json prints
the list of {path, kind}. A and B are any refs: branches, commit ids or
prefixes, layers, each optionally with ~N. PATHs (after the refs, or after
--) limit it to changes at or below them. The cost follows the change, not
the tree: only subtrees whose ids differ are read.`,
		flags: func(c *cli) {
			c.fs.BoolVar(&diffFlags.stat, "stat", false, "list changed paths with their kind instead of diffs")
			c.fs.IntVar(&diffFlags.context, "U", 3, "`N` lines of context around each change")
			c.jsonFlag()
		},
		run: runDiff,
	})
}

func runDiff(c *cli, args []string) error {
	if err := c.want(args, 2, -1); err != nil {
		return err
	}
	if diffFlags.context < 0 {
		return fmt.Errorf("%w: -U %d: want 0 or more", errUsage, diffFlags.context)
	}
	st, err := c.open(false)
	if err != nil {
		return err
	}
	if !c.json && !diffFlags.stat {
		text, err := st.DiffText(args[0], args[1], diffFlags.context, args[2:]...)
		if err != nil {
			return err
		}
		_, err = fmt.Fprint(c.out, text)
		return err
	}
	changes, err := st.Diff(args[0], args[1], args[2:]...)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(toChangeJSON(changes))
	}
	printStat(c, "", toChangeJSON(changes))
	return nil
}
