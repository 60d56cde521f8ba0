package main

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/layerfs/layerfs/store"
)

var lsFlags struct{ long bool }

func init() {
	register(&command{
		name:    "ls",
		args:    "REF[:PATH]",
		summary: "list a directory of a ref's tree",
		help:    `Lists the entries of PATH (default: the root) in the tree REF names.`,
		flags: func(c *cli) {
			c.fs.BoolVar(&lsFlags.long, "l", false, "long listing: mode, owner, size, mtime, id")
			c.jsonFlag()
		},
		run: runLs,
	})
}

type entryJSON struct {
	Name   string    `json:"name"`
	Type   string    `json:"type"`
	Mode   string    `json:"mode"`
	UID    uint32    `json:"uid"`
	GID    uint32    `json:"gid"`
	Size   int64     `json:"size"`
	MTime  time.Time `json:"mtime"`
	ID     string    `json:"id,omitempty"`
	Target string    `json:"target,omitempty"`
}

func toEntryJSON(e *store.Entry) entryJSON {
	j := entryJSON{Name: e.Name, Type: e.Type.String(), Mode: fmt.Sprintf("%04o", e.Mode), UID: e.UID, GID: e.GID,
		Size: e.Size, MTime: time.Unix(0, e.MTime).UTC(), Target: e.Target}
	if !e.ID.IsZero() {
		j.ID = e.ID.String()
	}
	return j
}

// refOrPath adds to an unknown ref, given without ':', that ls reads the
// part before ':' as the ref: layerfs ls src meant main:src, likely.
func refOrPath(args []string, err error) error {
	if len(args) == 1 && !strings.Contains(args[0], ":") && errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w (a directory is named after the ref: main:%s)", err, args[0])
	}
	return err
}

func runLs(c *cli, args []string) error {
	if err := c.want(args, 1, 1); err != nil {
		return err
	}
	st, err := c.open(false)
	if err != nil {
		return err
	}
	s := st.Backend()
	ref, path := splitRefPath(args[0])
	path = strings.TrimSuffix(path, "/") // main:src/ lists src, as ls does
	root, _, err := s.CommitRoot(ref)
	if err != nil {
		return refOrPath(args, err)
	}
	e, err := s.Lookup(root, path)
	if err != nil {
		return err
	}
	entries := []store.Entry{e}
	if e.Type == store.TypeDir {
		t, err := s.Tree(e.ID)
		if err != nil {
			return err
		}
		entries = t.Entries
	}
	if c.json {
		out := make([]entryJSON, len(entries))
		for i := range entries {
			out[i] = toEntryJSON(&entries[i])
		}
		return c.printJSON(out)
	}
	return printEntries(c, entries)
}

func printEntries(c *cli, entries []store.Entry) error {
	w := tabwriter.NewWriter(c.out, 0, 4, 1, ' ', tabwriter.AlignRight)
	for i := range entries {
		e := &entries[i]
		name := quoteName(e.Name)
		if e.Type == store.TypeDir {
			name += "/"
		}
		if e.Type == store.TypeSymlink {
			name += " -> " + quoteName(e.Target)
		}
		if !lsFlags.long {
			fmt.Fprintln(c.out, name)
			continue
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t %s\t %s\t %s\n", lsMode(e.Type, e.Mode), e.UID, e.GID, e.Size,
			time.Unix(0, e.MTime).Format("2006-01-02 15:04"), e.ID.Short(), name)
	}
	return w.Flush()
}
