package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
)

func init() {
	registerFS(&command{
		name:    "ls",
		args:    "[REF[:DIR]]",
		summary: "list a directory with types and sizes",
		help: `Lists the entries of DIR (default: the root) in REF (default: main), sorted by
name: type, size and name; directories end in '/', symlinks show their
target. Note that here the part before ':' is always the ref: layerfs fs ls
main:src, not layerfs fs ls src.`,
		flags: func(c *cli) { c.jsonFlag() },
		run:   runFSLs,
	})
}

func runFSLs(c *cli, args []string) error {
	if err := c.want(args, 0, 1); err != nil {
		return err
	}
	ref, dir := "main", ""
	if len(args) == 1 {
		ref, dir = splitRefPath(args[0])
		dir = strings.TrimSuffix(dir, "/") // main:src/ lists src, as ls does
	}
	f, err := openFS(c, ref)
	if err != nil {
		return refOrPath(args, err)
	}
	list, err := f.List(dir)
	if err != nil {
		return err
	}
	if c.json {
		out := make([]fileJSON, len(list))
		for i := range list {
			out[i] = toFileJSON(&list[i])
		}
		return c.printJSON(out)
	}
	w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	for i := range list {
		fi := &list[i]
		name := quoteName(fi.Name)
		switch fi.Kind {
		case "dir":
			name += "/"
		case "symlink":
			name += " -> " + quoteName(fi.Target)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", fi.Kind, fmtSize(fi), name)
	}
	return w.Flush()
}
