package main

import (
	"fmt"
	"time"

	"github.com/layerfs/layerfs/object"
)

var logFlags struct{ max int }

func init() {
	register(&command{
		name:    "log",
		args:    "REF",
		summary: "show a ref's history, newest first",
		help:    `Follows first parents from REF and prints each commit: id, time, origin, message.`,
		flags: func(c *cli) {
			c.fs.IntVar(&logFlags.max, "n", 0, "show at most `N` commits (0: all)")
			c.jsonFlag()
		},
		run: runLog,
	})
}

type logJSON struct {
	Commit  string    `json:"commit"`
	Parents []string  `json:"parents"`
	Tree    string    `json:"tree"`
	Origin  string    `json:"origin"`
	Message string    `json:"message"`
	Time    time.Time `json:"time"`
}

func runLog(c *cli, args []string) error {
	if err := c.want(args, 1, 1); err != nil {
		return err
	}
	st, err := c.open(false)
	if err != nil {
		return err
	}
	s := st.Backend()
	r, err := s.Resolve(args[0])
	if err != nil {
		return err
	}
	var out []logJSON
	for id, n := r.Commit, 0; !id.IsZero() && (logFlags.max == 0 || n < logFlags.max); n++ {
		cm, err := s.Commit(id)
		if err != nil {
			return err
		}
		e := logJSON{Commit: id.String(), Tree: cm.Tree.String(), Origin: cm.Origin, Message: cm.Message, Time: cm.When().UTC()}
		for _, p := range cm.Parents {
			e.Parents = append(e.Parents, p.String())
		}
		if c.json {
			out = append(out, e)
		} else {
			fmt.Fprintf(c.out, "%s  %s  %-28s %s\n", id.Short(), e.Time.Format(time.RFC3339), cm.Origin, cm.Message)
		}
		id = object.Zero
		if len(cm.Parents) > 0 {
			id = cm.Parents[0]
		}
	}
	if c.json {
		return c.printJSON(out)
	}
	return nil
}
