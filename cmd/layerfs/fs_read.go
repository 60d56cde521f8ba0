package main

import (
	"encoding/base64"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/layerfs/layerfs"
)

func init() {
	registerFS(&command{
		name:    "read",
		args:    "[REF:]PATH",
		summary: "print a file's contents",
		help: `Prints the file's bytes; a symlink reads as its target. With --json: the
commit read (pass it to a later call as --base), the size, and the content
as "text" when it is UTF-8 text, else as "base64".` + "\n" + fsTargetHelp,
		flags: func(c *cli) { c.jsonFlag() },
		run:   runFSRead,
	})
}

type readJSON struct {
	Path   string `json:"path"`
	Commit string `json:"commit"`
	Size   int    `json:"size"`
	Text   string `json:"text,omitempty"`
	Base64 string `json:"base64,omitempty"`
}

func runFSRead(c *cli, args []string) error {
	f, path, err := fsTarget(c, args)
	if err != nil {
		return err
	}
	if err := needPath(args[0], path); err != nil {
		return err
	}
	if !c.json {
		// Streamed: a big file is never held whole in memory.
		r, err := f.Reader(path)
		if err != nil {
			return err
		}
		_, err = io.Copy(c.out, r)
		return err
	}
	data, err := f.Read(path)
	if err != nil {
		return err
	}
	j := readJSON{Path: path, Commit: f.Base().String(), Size: len(data)}
	if layerfs.IsText(data) && utf8.Valid(data) {
		j.Text = string(data)
	} else {
		j.Base64 = base64.StdEncoding.EncodeToString(data)
	}
	return c.printJSON(j)
}

// fmtSize keeps columns of sizes narrow.
func fmtSize(fi *layerfs.FileInfo) string {
	if fi.Kind == "dir" {
		return "-"
	}
	return fmt.Sprint(fi.Size)
}
