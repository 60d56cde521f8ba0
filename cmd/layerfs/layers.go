package main

import (
	"fmt"
	"text/tabwriter"
	"time"
)

func init() {
	register(&command{
		name:    "layers",
		args:    "",
		summary: "list main's Layers, newest first",
		flags:   func(c *cli) { c.jsonFlag() },
		run:     runLayers,
	})
	register(&command{
		name:    "squash",
		args:    "FROM TO",
		summary: "fold main's Layers FROM..TO into one",
		help: `Folds the run of visible Layers FROM through TO (L<n> or n, see layerfs
layers) into one Layer with the same final tree: main's view does not
change. Nothing is deleted: the folded Layers' Commits stay, so forks and
Workspaces on them keep working, L<n> still resolves, and blame is kept
apart from Layers, so it is unchanged.`,
		flags: func(c *cli) { c.jsonFlag() },
		run:   runSquash,
	})
}

type layerJSON struct {
	Name    string    `json:"name"`
	Seq     int64     `json:"seq"`
	ID      string    `json:"id"`
	Commit  string    `json:"commit"`
	Created time.Time `json:"created"`
}

func runLayers(c *cli, args []string) error {
	if err := c.want(args, 0, 0); err != nil {
		return err
	}
	st, err := c.open(false)
	if err != nil {
		return err
	}
	ls, err := st.Layers()
	if err != nil {
		return err
	}
	if c.json {
		out := make([]layerJSON, len(ls))
		for i, l := range ls {
			out[i] = layerJSON{l.Name(), l.Seq, l.ID.String(), l.Commit.String(), l.Created.UTC()}
		}
		return c.printJSON(out)
	}
	w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	for _, l := range ls {
		cm, err := st.Backend().Commit(l.Commit)
		msg := ""
		if err == nil {
			msg = cm.Message
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", l.Name(), l.Commit.Short(), l.Created.Format(time.RFC3339), msg)
	}
	return w.Flush()
}

func runSquash(c *cli, args []string) error {
	if err := c.want(args, 2, 2); err != nil {
		return err
	}
	st, err := c.open(false)
	if err != nil {
		return err
	}
	l, err := st.Squash(args[0], args[1])
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(layerJSON{Name: l.Name(), Seq: l.Seq, ID: l.ID.String(), Commit: l.Commit.String()})
	}
	fmt.Fprintf(c.out, "squashed %s..%s into %s (commit %s)\n", args[0], args[1], l.Name(), l.Commit.Short())
	return nil
}
