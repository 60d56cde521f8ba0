package main

import (
	"fmt"
	"time"
)

func init() {
	registerFS(&command{
		name:    "stat",
		args:    "[REF:]PATH",
		summary: "describe one path: type, mode, size, mtime, id",
		help: `Prints the entry at PATH ('.' is the root). --json adds the commit read, for a
later call's --base.` + "\n" + fsTargetHelp,
		flags: func(c *cli) { c.jsonFlag() },
		run:   runFSStat,
	})
}

type statJSON struct {
	fileJSON
	Commit string `json:"commit"`
}

func runFSStat(c *cli, args []string) error {
	f, path, err := fsTarget(c, args)
	if err != nil {
		return err
	}
	fi, err := f.Stat(path)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(statJSON{toFileJSON(&fi), f.Base().String()})
	}
	name := quoteName(fi.Path)
	if fi.Target != "" {
		name += " -> " + quoteName(fi.Target)
	}
	fmt.Fprintf(c.out, "%s %s %s %d:%d %s %s %s\n", fi.Kind, lsMode(fi.Type, fi.Mode), fmtSize(&fi), fi.UID, fi.GID,
		fi.MTime.UTC().Format(time.RFC3339), fi.ID.Short(), name)
	return nil
}
