package main

import (
	"fmt"
)

func init() {
	register(&command{
		name:    "stats",
		args:    "",
		summary: "show what the Store holds and how well it dedupes and compresses",
		help: `logical:   file bytes in the trees of every branch head and every layer,
           counted once per head and per layer (what a copy each would cost)
canonical: bytes of the distinct objects, uncompressed
stored:    bytes of the objects as stored (compressed, or deltas)
file:      the Store file and its WAL on disk
dedupe = logical / canonical, compression = canonical / stored.`,
		flags: func(c *cli) { c.jsonFlag() },
		run:   runStats,
	})
}

func runStats(c *cli, args []string) error {
	if err := c.want(args, 0, 0); err != nil {
		return err
	}
	st, err := c.open(false)
	if err != nil {
		return err
	}
	s, err := st.Backend().Stats()
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(s)
	}
	fmt.Fprintf(c.out, "logical     %12d  %s\n", s.LogicalBytes, humanBytes(s.LogicalBytes))
	fmt.Fprintf(c.out, "canonical   %12d  %s\n", s.CanonicalBytes, humanBytes(s.CanonicalBytes))
	fmt.Fprintf(c.out, "stored      %12d  %s\n", s.StoredBytes, humanBytes(s.StoredBytes))
	fmt.Fprintf(c.out, "file        %12d  %s\n", s.FileBytes, humanBytes(s.FileBytes))
	fmt.Fprintf(c.out, "dedupe      %12.2f\n", s.Dedupe)
	fmt.Fprintf(c.out, "compression %12.2f\n", s.Compression)
	fmt.Fprintf(c.out, "objects     %12d\npacks       %12d\nbranches    %12d\nlayers      %12d\n",
		s.Objects, s.Packs, s.Branches, s.Layers)
	return nil
}
