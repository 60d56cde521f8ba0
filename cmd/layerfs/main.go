// Command layerfs is the LayerFS command line: capture a project into a
// Store, fork and inspect its history, export trees, and check the Store.
package main

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/layerfs/layerfs/sessions"
)

// command is one subcommand. Each lives in its own file.
type command struct {
	name    string
	args    string // positional arguments, for usage lines
	summary string
	help    string // what it does, in a paragraph or two
	flags   func(c *cli)
	run     func(c *cli, args []string) error
	verbs   map[string]*command // subcommands ("fs read"), each with its own flags
	noStore bool                // opens no Store: no --store, --durability
}

var commands = map[string]*command{}

func register(c *command) { commands[c.name] = c }

func main() {
	if len(os.Args) == 2 && os.Args[1] == sessions.HolderArg {
		os.Exit(sessions.HolderMain()) // a Workspace's namespace holder
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs one command line and returns its exit code; output that cannot
// be written is an error (exit 1), help and version included.
func run(args []string, stdout, stderr io.Writer) int {
	out := &errWriter{w: stdout}
	code := runTo(args, out, stderr)
	if code == exitOK && out.err != nil {
		fmt.Fprintf(stderr, "layerfs: write standard output: %v\n", out.err)
		return exitError
	}
	return code
}

func runTo(args []string, stdout *errWriter, stderr io.Writer) int {
	if len(args) == 0 { // a mistake, as for git: usage, to stderr
		usage(stderr)
		return exitUsage
	}
	if isHelp(args[0]) {
		if len(args) > 1 && isHelp(args[1]) { // help help
			usage(stdout)
			return exitOK
		}
		if len(args) > 1 { // help CMD [VERB]: the command's own
			if cmd, ok := commands[args[1]]; ok {
				cmd, _ = verb(cmd, args[1:])
				newCLI(cmd, stdout, stderr).usage(stdout)
				return exitOK
			}
			fmt.Fprintf(stderr, "layerfs: no command %q; run layerfs --help\n", args[1])
			return exitUsage
		}
		usage(stdout)
		return exitOK
	}
	if args[0] == "--version" || args[0] == "version" {
		fmt.Fprintln(stdout, "layerfs", version())
		return exitOK
	}
	if args[0] == "-version" || args[0] == "-v" {
		fmt.Fprintf(stderr, "layerfs: %s: did you mean --version?\n", args[0])
		return exitUsage
	}
	cmd, ok := commands[args[0]]
	if !ok && strings.HasPrefix(args[0], "-") {
		fmt.Fprintf(stderr, "layerfs: %s before the command: flags go after it, as in layerfs log %s ...; run layerfs --help\n", args[0], args[0])
		return exitUsage
	}
	if !ok {
		fmt.Fprintf(stderr, "layerfs: unknown command %q; run layerfs --help\n", args[0])
		return exitUsage
	}
	cmd, args = verb(cmd, args)
	out := stdout
	c := newCLI(cmd, out, stderr)
	rest, err := c.parse(args[1:])
	if err != nil {
		return c.fail(err)
	}
	if c.help {
		c.usage(stdout)
		return exitOK
	}
	err = cmd.run(c, rest)
	if err == nil && out.err != nil {
		// A full disk or a closed pipe: the output is not all there.
		err = fmt.Errorf("write standard output: %w", out.err)
		out.err = nil // said once
	}
	return c.fail(err)
}

// errWriter remembers the first error writing to w; after it, it writes
// nothing more.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	if err != nil {
		e.err = err
	}
	return n, err
}

// verb picks a command's subcommand when the next argument names one.
func verb(cmd *command, args []string) (*command, []string) {
	if len(args) > 1 {
		if v, ok := cmd.verbs[args[1]]; ok {
			return v, args[1:]
		}
	}
	return cmd, args
}

// version is the module's version and, for a build from a checkout, the
// commit it was built from.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	// Go stamps a pseudo-version naming the commit (and +dirty) where
	// it can; a build with -buildvcs=false has "(devel)" and no commit.
	v := bi.Main.Version
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision" && !strings.Contains(v, s.Value[:min(12, len(s.Value))]):
			v += " " + s.Value[:min(12, len(s.Value))]
		case s.Key == "vcs.modified" && s.Value == "true" && !strings.HasSuffix(v, "+dirty"):
			v += " (modified)"
		}
	}
	return v
}

func isHelp(a string) bool { return a == "-h" || a == "--help" || a == "help" }

func usage(w io.Writer) {
	fmt.Fprint(w, `layerfs keeps a project's whole history in one SQLite file (the Store) and
gives agents cheap forks, checkpoints and exports of it.

Usage: layerfs COMMAND [flags] [args]

Commands:
`)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprint(w, `
The Store is --store FILE, or $LAYERFS_STORE. Run layerfs COMMAND --help (or
layerfs help COMMAND) for a command's flags; they go after the command.
layerfs --version prints the version.

Exit codes:
  0  success (committed or up to date, for a call that writes)
  1  any other error
  2  bad flags, arguments, names or paths (.., absolute paths, a binary file for edit)
  3  not found: unknown ref, branch, path or Workspace, no Store, edit text not found
  4  conflict: the branch changed the same path, overlapping edits; also already
     exists, ambiguous ref prefix, edit text found more than once, uncommitted
     changes, conflict markers left or a conflict not settled, commands still
     running at a commit, a file that changed while a commit read it, the
     Workspace cap, a state directory or socket in use, a state directory of
     another Store, deleting a leased branch
  5  the Store is damaged (corrupt or missing objects)
  6  unsupported: a Store on an unsupported filesystem, a newer format, not a Store
  ws exec exits with its command's own status; 127 if its program is not
  there, 126 if it cannot be run.
`)
}
