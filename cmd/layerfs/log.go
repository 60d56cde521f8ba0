package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/layerfs/layerfs"
	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/publish"
)

var logFlags struct {
	max              int
	stat, nameStatus bool
}

func init() {
	register(&command{
		name:    "log",
		args:    "REF",
		summary: "show a ref's history, newest first",
		help: `Follows first parents from REF and prints each commit: id, time, origin,
message. --name-status adds the paths each commit changed, one per line with
a letter (A added, M modified, D deleted, T type changed); --stat adds them
with their kind and a count. With --json, either flag adds "changes": a list
of {path, kind} per commit. The first commit of a history (init) lists its
whole tree; -n bounds the count.`,
		flags: func(c *cli) {
			c.fs.IntVar(&logFlags.max, "n", 0, "show at most `N` commits (0: all)")
			c.fs.BoolVar(&logFlags.stat, "stat", false, "list each commit's changed paths with their kind, and a count")
			c.fs.BoolVar(&logFlags.nameStatus, "name-status", false, "list each commit's changed paths with a status letter")
			c.jsonFlag()
		},
		run: runLog,
	})
}

type logJSON struct {
	Commit  string       `json:"commit"`
	Parents []string     `json:"parents"`
	Tree    string       `json:"tree"`
	Origin  string       `json:"origin"`
	Message string       `json:"message"`
	Time    time.Time    `json:"time"`
	Changes []changeJSON `json:"changes,omitempty"`
}

type changeJSON struct {
	Path string `json:"path"`
	Kind string `json:"kind"`
}

func runLog(c *cli, args []string) error {
	if err := c.want(args, 1, 1); err != nil {
		return err
	}
	if logFlags.max < 0 {
		return fmt.Errorf("%w: -n %d: want 0 (all) or more", errUsage, logFlags.max)
	}
	if logFlags.stat && logFlags.nameStatus {
		return fmt.Errorf("%w: --stat or --name-status, not both", errUsage)
	}
	st, err := c.open(false)
	if err != nil {
		return err
	}
	changes := logFlags.stat || logFlags.nameStatus
	entries, err := history(st, args[0], logFlags.max, changes)
	if err != nil && (c.json || len(entries) == 0) {
		return err
	}
	if c.json {
		return c.printJSON(entries)
	}
	for i := range entries {
		printLogEntry(c, &entries[i])
	}
	if err != nil { // what could be read, then why the rest could not
		return fmt.Errorf("history stops after %d commit(s): %w", len(entries), err)
	}
	return nil
}

// history lists REF's commits; with changes, the paths each one changed.
func history(st *layerfs.Store, ref string, max int, changes bool) ([]logJSON, error) {
	if changes {
		return historyWithChanges(st, ref, max)
	}
	s := st.Backend()
	r, err := s.Resolve(ref)
	if err != nil {
		return nil, err
	}
	var out []logJSON
	for id := r.Commit; !id.IsZero() && (max <= 0 || len(out) < max); {
		cm, err := s.Commit(id)
		if err != nil {
			return out, err // the commits before it stand
		}
		out = append(out, logJSON{Commit: id.String(), Parents: idStrings(cm.Parents), Tree: cm.Tree.String(),
			Origin: cm.Origin, Message: cm.Message, Time: cm.When().UTC()})
		id = object.Zero
		if len(cm.Parents) > 0 {
			id = cm.Parents[0]
		}
	}
	return out, nil
}

func historyWithChanges(st *layerfs.Store, ref string, max int) ([]logJSON, error) {
	log, logErr := st.Log(ref, max) // what it could read, and why it stopped
	out := make([]logJSON, len(log))
	for i, e := range log {
		cm, err := st.Backend().Commit(e.Commit)
		if err != nil {
			return out[:i], err
		}
		out[i] = logJSON{Commit: e.Commit.String(), Parents: idStrings(e.Parents), Tree: cm.Tree.String(),
			Origin: e.Origin, Message: e.Message, Time: e.Time.UTC(), Changes: toChangeJSON(e.Changes)}
	}
	return out, logErr
}

func idStrings(ids []object.ID) []string {
	out := []string{}
	for _, id := range ids {
		out = append(out, id.String())
	}
	return out
}

func toChangeJSON(ds []publish.PathDiff) []changeJSON {
	out := make([]changeJSON, len(ds))
	for i, d := range ds {
		out[i] = changeJSON{Path: d.Path, Kind: string(d.Kind)}
	}
	return out
}

func printLogEntry(c *cli, e *logJSON) {
	fmt.Fprintf(c.out, "%s  %s  %-28s %s\n", e.Commit[:12], e.Time.Format(time.RFC3339), e.Origin, firstLine(e.Message))
	switch {
	case logFlags.nameStatus:
		for _, ch := range e.Changes {
			fmt.Fprintf(c.out, "    %s\t%s\n", kindLetter(ch.Kind), quoteName(ch.Path))
		}
	case logFlags.stat:
		printStat(c, "    ", e.Changes)
	}
}

// kindLetter is git's status letter for a change kind.
func kindLetter(kind string) string {
	return map[string]string{string(publish.Added): "A", string(publish.Modified): "M",
		string(publish.Deleted): "D", string(publish.TypeChanged): "T"}[kind]
}

// printStat lists changed paths with their kind, then a count per kind.
func printStat(c *cli, indent string, changes []changeJSON) {
	width := 0
	for _, ch := range changes {
		width = max(width, len(ch.Kind))
	}
	counts := map[string]int{}
	for _, ch := range changes {
		fmt.Fprintf(c.out, "%s%-*s  %s\n", indent, width, ch.Kind, quoteName(ch.Path))
		counts[ch.Kind]++
	}
	var parts []string
	for _, k := range []publish.ChangeKind{publish.Added, publish.Modified, publish.Deleted, publish.TypeChanged} {
		if n := counts[string(k)]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
	}
	noun := "paths"
	if len(changes) == 1 {
		noun = "path"
	}
	fmt.Fprintf(c.out, "%s%d %s changed", indent, len(changes), noun)
	if len(parts) > 0 {
		fmt.Fprintf(c.out, ": %s", strings.Join(parts, ", "))
	}
	fmt.Fprintln(c.out)
}
