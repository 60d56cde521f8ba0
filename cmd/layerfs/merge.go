package main

import (
	"fmt"
	"strings"

	"github.com/layerfs/layerfs"
	"github.com/layerfs/layerfs/publish"
)

var mergeFlags struct{ id, message string }

func init() {
	mergeFlag := func(c *cli) {
		c.fs.StringVar(&mergeFlags.id, "id", "", "operation id (the merge commit's origin is operation:ID; default random)")
		c.fs.StringVar(&mergeFlags.message, "message", "", "commit message")
		c.jsonFlag()
	}
	register(&command{
		name:    "merge",
		args:    "INTO FROM",
		summary: "fold branch FROM into branch INTO",
		help: `A fast-forward when INTO has not moved since FROM left it; nothing when
FROM is already in INTO's history; otherwise a three-way merge through the
publish gate, with INTO's /.lww rules: text both sides edited merges line
by line, overlapping edits conflict (exit 4, naming the paths; nothing is
written). The merge commit has both heads as parents, and blame keeps each
line's owner from its branch.`,
		flags: mergeFlag,
		run:   runMerge,
	})
	register(&command{
		name:    "publish",
		args:    "BRANCH",
		summary: "make BRANCH's head main's next Layer",
		help: `Merges BRANCH into main (a fast-forward when main has not moved), which
appends a Layer to main's manifest. See layerfs merge.`,
		flags: mergeFlag,
		run:   runPublish,
	})
}

func runMerge(c *cli, args []string) error {
	if err := c.want(args, 2, 2); err != nil {
		return err
	}
	st, err := c.open(false)
	if err != nil {
		return err
	}
	res, err := st.Merge(args[0], args[1], layerfs.Call{ID: mergeFlags.id, Message: mergeFlags.message})
	if err != nil {
		return err
	}
	return reportMerge(c, args[0], res)
}

func runPublish(c *cli, args []string) error {
	if err := c.want(args, 1, 1); err != nil {
		return err
	}
	st, err := c.open(false)
	if err != nil {
		return err
	}
	res, err := st.Publish(args[0], layerfs.Call{ID: mergeFlags.id, Message: mergeFlags.message})
	if err != nil {
		return err
	}
	if err := reportMerge(c, "main", res); err != nil {
		return err
	}
	if ls, err := st.Layers(); err == nil && len(ls) > 0 && !c.json && res.Status == publish.Committed {
		fmt.Fprintf(c.out, "main's newest layer is now %s\n", ls[0].Name())
	}
	return nil
}

type mergeJSON struct {
	resultJSON
	FastForward bool     `json:"fast_forward,omitempty"`
	Merged      []string `json:"merged,omitempty"`
}

func reportMerge(c *cli, into string, res *layerfs.Result) error {
	if c.json {
		j := mergeJSON{resultJSON: resultJSON{Status: res.Status.String(), Branch: into, Head: res.Head.String(), Paths: res.Paths, LWW: res.LWW},
			FastForward: res.FastForward}
		if res.Status == publish.Committed {
			j.Commit = res.Commit.String()
		}
		for _, m := range res.Merged {
			j.Merged = append(j.Merged, m.Path)
		}
		if err := c.printJSON(j); err != nil {
			return err
		}
	} else {
		switch {
		case res.FastForward:
			fmt.Fprintf(c.out, "fast-forward %s to %s\n", into, res.Commit.Short())
		case res.Status == publish.Committed:
			fmt.Fprintf(c.out, "merged into %s as %s\n", into, res.Commit.Short())
		case res.Status == publish.UpToDate:
			fmt.Fprintf(c.out, "up-to-date: %s already holds it\n", into)
		}
		for _, m := range res.Merged {
			fmt.Fprintf(c.out, "  merged line by line: %s\n", m.Path)
		}
		for _, d := range res.LWW {
			fmt.Fprintf(c.out, "  .lww: %s taken from %s\n", d.Path, d.Winner)
		}
	}
	if res.Status == publish.Conflict {
		var kinds []string
		for _, pc := range res.Conflicts {
			kinds = append(kinds, pc.Path+" ("+pc.Kind+")")
		}
		return fmt.Errorf("%w: %s; nothing was merged", errConflict, strings.Join(kinds, ", "))
	}
	return nil
}
