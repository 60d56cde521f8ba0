package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

var branchFlags struct{ force bool }

func init() {
	register(&command{
		name:    "branch",
		args:    "list | fork NAME FROM | delete [--force] NAME",
		summary: "list, fork or delete branches",
		help: `list shows every branch with its head. fork NAME FROM makes a new branch at
FROM — a branch, a commit id or unique prefix, a layer (L<n> or its id), or
any of these with ~N for the Nth parent — by writing one record; nothing is
copied. delete NAME removes the branch record; its commits stay. A branch
that Workspaces are leased on is refused, naming them (exit 4): end them
first, or delete with --force, and their next commit finds no branch.`,
		flags: func(c *cli) {
			c.jsonFlag()
			c.fs.BoolVar(&branchFlags.force, "force", false, "delete a branch even if Workspaces are leased on it")
		},
		run: runBranch,
	})
}

type branchJSON struct {
	Name    string    `json:"name"`
	Head    string    `json:"head"`
	Start   string    `json:"start"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

func runBranch(c *cli, args []string) error {
	if err := c.want(args, 1, 3); err != nil {
		return err
	}
	st, err := c.open(false)
	if err != nil {
		return err
	}
	s := st.Backend()
	switch args[0] {
	case "list", "ls":
		if err := c.want(args, 1, 1); err != nil {
			return err
		}
		return branchList(c)
	case "fork":
		if err := c.want(args, 3, 3); err != nil {
			return err
		}
		b, err := s.Fork(args[1], args[2])
		if err != nil {
			return err
		}
		if c.json {
			return c.printJSON(branchJSON{b.Name, b.Head.String(), b.Start, b.Created, b.Updated})
		}
		fmt.Fprintf(c.out, "%s %s (from %s)\n", b.Name, b.Head.Short(), b.Start)
		return nil
	case "delete", "rm":
		if err := c.want(args, 2, 2); err != nil {
			return err
		}
		// The head it had is said, as git does: no other record names
		// it, and with it a branch deleted by mistake can be forked again.
		var head object.ID
		err := s.Update(func(tx *store.RefTx) error {
			var err error
			if head, err = tx.Head(args[1]); err != nil {
				return err
			}
			return tx.DeleteBranch(args[1], branchFlags.force)
		})
		if err != nil {
			return err
		}
		if c.json {
			return c.printJSON(map[string]string{"deleted": args[1], "head": head.String()})
		}
		fmt.Fprintf(c.out, "deleted branch %s (was %s)\n", args[1], head.Short())
		return nil
	}
	return fmt.Errorf("%w: unknown branch subcommand %q: want list, fork or delete", errUsage, args[0])
}

func branchList(c *cli) error {
	bs, err := c.st.Backend().Branches()
	if err != nil {
		return err
	}
	if c.json {
		out := make([]branchJSON, 0, len(bs))
		for _, b := range bs {
			out = append(out, branchJSON{b.Name, b.Head.String(), b.Start, b.Created, b.Updated})
		}
		return c.printJSON(out)
	}
	w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	for _, b := range bs {
		fmt.Fprintf(w, "%s\t%s\tfrom %s\t%s\n", b.Name, b.Head.Short(), b.Start, b.Updated.Format(time.RFC3339))
	}
	return w.Flush()
}
