package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/layerfs/layerfs"
	"github.com/layerfs/layerfs/store"
)

// cli is one invocation: the command, its flags, and the Store it opens.
type cli struct {
	cmd         *command
	fs          *flag.FlagSet
	storePath   string
	durability  string
	json        bool
	help        bool
	out, errOut io.Writer
	st          *layerfs.Store
}

func newCLI(cmd *command, stdout, stderr io.Writer) *cli {
	c := &cli{cmd: cmd, out: stdout, errOut: stderr}
	c.fs = flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	c.fs.SetOutput(io.Discard)
	if !cmd.noStore {
		c.fs.StringVar(&c.storePath, "store", os.Getenv("LAYERFS_STORE"), "the Store `FILE` (default $LAYERFS_STORE)")
		c.fs.StringVar(&c.durability, "durability", "normal", "fast, normal or full: what a commit survives (see README)")
	}
	c.fs.BoolVar(&c.help, "help", false, "show this help")
	if cmd.flags != nil {
		cmd.flags(c)
	}
	return c
}

// jsonFlag adds --json to a command.
func (c *cli) jsonFlag() { c.fs.BoolVar(&c.json, "json", false, "print JSON for scripts") }

// parse reads flags anywhere among the arguments, like most CLIs do;
// everything after "--" is positional.
func (c *cli) parse(args []string) ([]string, error) {
	var pos []string
	if c.fs.Lookup("n") != nil {
		args = c.shortNumbers(args)
	}
	for {
		if len(args) > 0 && args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		if err := c.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				c.help = true
				return nil, nil
			}
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		rest := c.fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil // the flag package ate the "--"
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// shortNumbers spells -n5 as -n 5, as git and head take it; not where
// it is the value of the flag before it (--old -n5).
func (c *cli) shortNumbers(args []string) []string {
	var out []string
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) > 2 && strings.HasPrefix(a, "-n") && strings.Trim(a[2:], "0123456789") == "" && !c.takesValue(args, i) {
			out = append(out, "-n", a[2:])
			continue
		}
		out = append(out, a)
	}
	return out
}

// takesValue reports whether args[i] is the value of the flag before it.
func (c *cli) takesValue(args []string, i int) bool {
	if i == 0 || !strings.HasPrefix(args[i-1], "-") || strings.Contains(args[i-1], "=") {
		return false
	}
	f := c.fs.Lookup(strings.TrimLeft(args[i-1], "-"))
	if f == nil {
		return false
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return !ok || !b.IsBoolFlag()
}

func (c *cli) usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: layerfs %s [flags] %s\n\n%s\n", c.cmd.name, c.cmd.args, c.cmd.summary)
	if c.cmd.help != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.cmd.help))
	}
	fmt.Fprintln(w, "\nFlags:")
	c.fs.SetOutput(w)
	c.fs.PrintDefaults()
}

// want checks the number of positional arguments.
func (c *cli) want(args []string, min, max int) error {
	if len(args) < min || (max >= 0 && len(args) > max) {
		return fmt.Errorf("%w: layerfs %s %s (see --help)", errUsage, c.cmd.name, c.cmd.args)
	}
	return nil
}

// open opens the Store named by --store or $LAYERFS_STORE.
func (c *cli) open(create bool) (*layerfs.Store, error) {
	if c.storePath == "" {
		return nil, fmt.Errorf("%w: no Store: pass --store FILE or set LAYERFS_STORE", errUsage)
	}
	d, err := store.ParseDurability(c.durability)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	c.st, err = layerfs.Open(c.storePath, layerfs.Options{Durability: d, Create: create})
	return c.st, err
}

// fail prints err and returns the exit code it maps to.
func (c *cli) fail(err error) int {
	if c.st != nil {
		c.st.Close()
	}
	if err == nil {
		return exitOK
	}
	var status *exitStatus
	if errors.As(err, &status) {
		return status.code // a command's own exit status, passed through
	}
	fmt.Fprintf(c.errOut, "layerfs %s: %v\n", c.cmd.name, err)
	return exitCode(err)
}

func (c *cli) printJSON(v any) error {
	enc := json.NewEncoder(c.out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// splitRefPath reads REF[:PATH].
func splitRefPath(s string) (ref, path string) {
	ref, path, _ = strings.Cut(s, ":")
	return ref, path
}

// fileAt takes the one REF:PATH argument of a command that reads a file
// at a ref, and opens the Store.
func (c *cli) fileAt(args []string) (st *layerfs.Store, ref, path string, err error) {
	if err := c.want(args, 1, 1); err != nil {
		return nil, "", "", err
	}
	ref, path = splitRefPath(args[0])
	if path == "" {
		return nil, "", "", fmt.Errorf("%w: give REF:PATH", errUsage)
	}
	st, err = c.open(false)
	return st, ref, path, err
}
