package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/layerfs/layerfs"
)

func init() {
	register(&command{
		name:    "export",
		args:    "REF[:PATH] DIR",
		summary: "materialize a ref's tree in a directory",
		help: `Writes the tree REF names (or only PATH within it) into DIR, which must be
missing or empty: contents, modes, mtimes and symlinks, and owners when run
as root.`,
		flags: func(c *cli) { c.jsonFlag() },
		run:   runExport,
	})
}

func runExport(c *cli, args []string) error {
	if err := c.want(args, 2, 2); err != nil {
		return err
	}
	st, err := c.open(false)
	if err != nil {
		return err
	}
	ref, path := splitRefPath(args[0])
	path = strings.TrimSuffix(path, "/") // main:src/ is src, as for ls
	res, err := st.Export(ref, args[1], layerfs.ExportOptions{Path: path})
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(struct {
			Files      int     `json:"files"`
			Dirs       int     `json:"dirs"`
			Symlinks   int     `json:"symlinks"`
			Bytes      int64   `json:"bytes"`
			DurationMS float64 `json:"duration_ms"`
		}{res.Files, res.Dirs, res.Symlinks, res.Bytes, ms(res.Duration)})
	}
	fmt.Fprintf(c.out, "%d files, %d dirs, %d symlinks, %s in %s\n", res.Files, res.Dirs, res.Symlinks,
		humanBytes(res.Bytes), res.Duration.Round(time.Millisecond))
	return nil
}
