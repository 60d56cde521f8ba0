package main

import (
	"fmt"
	"strings"

	"github.com/layerfs/layerfs/publish"
)

func init() {
	register(&command{
		name:    "blame",
		args:    "REF:PATH",
		summary: "show who last changed each line of a file",
		help: `Prints one line per line of the file, like git blame: the owner (the origin
of the Commit that last changed the line: operation:<id>,
workspace_session:<id>, original for lines init captured; where a Commit's
ownership was not recorded it is worked out from history, and reads unknown
only if that fails too), the line number, and the text.
A binary file (or one over 8 MiB) has one owner for the whole file. --json
prints the path and the owner ranges {start, end, owner}.`,
		flags: func(c *cli) { c.jsonFlag() },
		run:   runBlame,
	})
}

func runBlame(c *cli, args []string) error {
	st, ref, path, err := c.fileAt(args)
	if err != nil {
		return err
	}
	b, err := st.Blame(ref, path)
	if err != nil {
		return err
	}
	if c.json {
		if b.Ranges == nil {
			b.Ranges = []publish.Range{}
		}
		return c.printJSON(b)
	}
	printBlame(c, b)
	return nil
}

func printBlame(c *cli, b *publish.BlameResult) {
	width := 0
	for _, r := range b.Ranges {
		width = max(width, len(r.Owner))
	}
	if b.Binary {
		for _, r := range b.Ranges {
			fmt.Fprintf(c.out, "%-*s  (binary file %s)\n", width, r.Owner, b.Path)
		}
		return
	}
	digits := len(fmt.Sprint(len(b.Lines)))
	for _, r := range b.Ranges {
		for n := r.Start; n <= r.End && n <= len(b.Lines); n++ {
			fmt.Fprintf(c.out, "%-*s  %*d) %s\n", width, r.Owner, digits, n, strings.TrimSuffix(b.Lines[n-1], "\n"))
		}
	}
}
