package main

import (
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/layerfs/layerfs"
	"github.com/layerfs/layerfs/api"
)

var wsFlags struct {
	socket, branch, path, cwd, message string
	timeout                            time.Duration
	isolate, discard, force, stdin     bool
	all                                bool
	allowRunning                       bool
	env                                envList
}

// envList collects repeated --env KEY=VALUE flags.
type envList []string

func (l *envList) String() string { return strings.Join(*l, ",") }
func (l *envList) Set(v string) error {
	if !strings.Contains(v, "=") {
		return fmt.Errorf("want KEY=VALUE, not %q", v)
	}
	*l = append(*l, v)
	return nil
}

func init() {
	register(&command{
		name:    "ws",
		noStore: true,
		args:    "create | ls | inspect ID | exec ID -- ARGV... | commit ID | discard ID | end ID",
		summary: "create, use, commit and end Workspaces (through the daemon)",
		help: `Talks to the daemon on --socket (default $LAYERFS_SOCKET, else the daemon's
default, /var/lib/layerfs/daemon.sock). Each subcommand takes only its own
flags, shown below. A daemon that takes a request and never answers (a
wedged one) is given up on, naming the socket (exit 1): ls after 30 s, the
others — which may run long — once a health check beside them gets no
answer within 30 s.

  create [--branch B] [--path P]   a Workspace of branch B (default main), seen at P
                                   (default /workspace) by the commands run in it
  ls                               every Workspace
  inspect ID                       one Workspace and its uncommitted changed paths
  exec ID [--cwd D] [--env K=V]... [--timeout T] [--isolate-network] [--stdin] -- ARGV...
                                   run a command; its output streams to ours and
                                   its exit code becomes ours
  commit ID [--message M] [--force] [--allow-running]
                                   capture and publish; prints the receipt. A
                                   conflict exits 4, names the paths, and leaves
                                   marker blocks in files whose edits overlap;
                                   other conflicts (binary, type, delete, mode)
                                   keep this Workspace's version, which a later
                                   commit refuses until it changes; --force
                                   commits markers and such versions anyway.
                                   The Workspace then follows the head, keeping
                                   what was not committed: paths /.layerfsignore
                                   matches, FIFOs, sockets and devices (unless
                                   their directory left the head: listed)
  discard ID [--all]               drop uncommitted changes; paths /.layerfsignore
                                   matches, FIFOs, sockets and devices stay (as
                                   across a commit) unless --all
  end ID [--discard]               unmount and remove it; refused while it holds
                                   uncommitted changes unless --discard`,
		flags: func(c *cli) {
			c.fs.StringVar(&wsFlags.socket, "socket", os.Getenv("LAYERFS_SOCKET"), "the daemon's unix socket `PATH` (default $LAYERFS_SOCKET, else "+defaultSocket+")")
			c.fs.StringVar(&wsFlags.branch, "branch", "main", "branch to create a Workspace of")
			c.fs.StringVar(&wsFlags.path, "path", api.DefaultPath, "where the Workspace appears to its commands")
			c.fs.StringVar(&wsFlags.cwd, "cwd", "", "working directory for exec: relative to the Workspace, or absolute as its commands see the filesystem")
			c.fs.StringVar(&wsFlags.message, "message", "", "commit message")
			c.fs.StringVar(&wsFlags.message, "m", "", "commit message (short for --message)")
			c.fs.DurationVar(&wsFlags.timeout, "timeout", 0, "kill the command after this long (0: never)")
			c.fs.BoolVar(&wsFlags.isolate, "isolate-network", false, "run the command with loopback only")
			c.fs.BoolVar(&wsFlags.discard, "discard", false, "end even with uncommitted changes, dropping them")
			c.fs.BoolVar(&wsFlags.all, "all", false, "discard also what /.layerfsignore matches, and FIFOs, sockets and devices")
			c.fs.BoolVar(&wsFlags.force, "force", false, "commit files that still hold conflict markers, and unsettled conflicts' versions")
			c.fs.BoolVar(&wsFlags.stdin, "stdin", false, "pass our standard input to the command, read to its end first (at most 32 MiB; not interactive); without it the command reads /dev/null")
			c.fs.BoolVar(&wsFlags.allowRunning, "allow-running", false, "commit while processes still run in the Workspace (their later writes are not kept)")
			wsFlags.env = nil
			c.fs.Var(&wsFlags.env, "env", "`KEY=VALUE` for exec (repeatable; replaces the environment)")
			c.jsonFlag()
		},
		run: runWS,
	})
}

func runWS(c *cli, args []string) error {
	if err := c.want(args, 1, -1); err != nil {
		return err
	}
	switch args[0] {
	case "create", "ls", "inspect", "exec", "commit", "discard", "end":
	default:
		return fmt.Errorf("%w: unknown ws subcommand %q (create, ls, inspect, exec, commit, discard, end)", errUsage, args[0])
	}
	sub, rest := args[0], args[1:]
	switch {
	case sub == "create" && len(rest) > 0:
		return fmt.Errorf("%w: layerfs ws create takes no arguments (got %q): name the branch with --branch B", errUsage, rest[0])
	case sub == "ls" && len(rest) > 0:
		return fmt.Errorf("%w: layerfs ws ls takes no arguments (got %q)", errUsage, rest[0])
	case sub == "create" || sub == "ls":
	case len(rest) == 0:
		return fmt.Errorf("%w: layerfs ws %s ID", errUsage, sub)
	case sub != "exec" && len(rest) > 1:
		// One at a time: ending the first of two and ignoring the other
		// would surprise.
		return fmt.Errorf("%w: layerfs ws %s takes one ID (got %d arguments)", errUsage, sub, len(rest))
	}
	if err := checkWSFlags(c, sub); err != nil {
		return err
	}
	if wsFlags.timeout < 0 {
		return fmt.Errorf("%w: --timeout %s: want 0 (none) or more", errUsage, wsFlags.timeout)
	}
	if wsFlags.socket == "" {
		wsFlags.socket = defaultSocket
	}
	cl := layerfs.Dial(wsFlags.socket)
	ctx := context.Background()
	switch sub {
	case "create":
		w, err := cl.Create(ctx, api.CreateRequest{Branch: wsFlags.branch, Path: wsFlags.path})
		return c.show(w, err, func() { fmt.Fprintln(c.out, w.ID) })
	case "ls":
		ws, err := cl.List(ctx)
		return c.show(ws, err, func() { printWorkspaces(c, ws) })
	case "inspect":
		w, err := cl.Inspect(ctx, rest[0])
		return c.show(w, err, func() { printWorkspace(c, w) })
	case "exec":
		return wsExec(c, cl, rest[0], rest[1:])
	case "commit":
		return wsCommit(c, cl, rest[0])
	case "discard":
		res, err := cl.Discard(ctx, rest[0], wsFlags.all)
		return c.show(res, err, func() { printDiscard(c, res) })
	case "end":
		err := cl.End(ctx, rest[0], wsFlags.discard)
		return c.show(struct {
			ID    string `json:"id"`
			Ended bool   `json:"ended"`
		}{rest[0], true}, err, func() {})
	}
	return fmt.Errorf("%w: unknown ws subcommand %q", errUsage, sub)
}

// defaultSocket is where the daemon listens by default (its default
// state directory's daemon.sock).
const defaultSocket = "/var/lib/layerfs/daemon.sock"

// wsSubFlags lists the flags each ws subcommand takes, besides --socket,
// --json and --help: a flag another subcommand takes is refused rather
// than ignored (ws commit --discard would commit).
var wsSubFlags = map[string][]string{
	"create":  {"branch", "path"},
	"ls":      {},
	"inspect": {},
	"exec":    {"cwd", "env", "timeout", "isolate-network", "stdin"},
	"commit":  {"message", "m", "force", "allow-running"},
	"discard": {"all"},
	"end":     {"discard"},
}

func checkWSFlags(c *cli, sub string) error {
	var bad []string
	c.fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "socket", "json", "help":
			return
		}
		if !slices.Contains(wsSubFlags[sub], f.Name) {
			bad = append(bad, "--"+f.Name)
		}
	})
	if len(bad) > 0 {
		return fmt.Errorf("%w: ws %s does not take %s (see layerfs help ws)", errUsage, sub, strings.Join(bad, ", "))
	}
	return nil
}

// show prints v as JSON with --json, else calls human.
func (c *cli) show(v any, err error, human func()) error {
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(v)
	}
	human()
	return nil
}

func printWorkspaces(c *cli, ws []api.Workspace) {
	w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	for _, x := range ws {
		fmt.Fprintf(w, "%s\t%s\t%.12s\t%s\t%s\n", x.ID, x.Branch, x.Lease, x.HostPath, plural(x.Commits, "commit"))
	}
	w.Flush()
}

func printWorkspace(c *cli, w api.Workspace) {
	fmt.Fprintf(c.out, "id       %s\nbranch   %s\nlease    %s\npath     %s\nhost     %s\ncommits  %d\n",
		w.ID, w.Branch, w.Lease, w.Path, w.HostPath, w.Commits)
	for _, p := range w.Pending {
		fmt.Fprintf(c.out, "pending  %s\n", quoteName(p))
	}
	for _, p := range w.Unsettled {
		fmt.Fprintf(c.out, "unsettled %s (a conflict left this Workspace's version: change it, or commit --force)\n", quoteName(p))
	}
}

func wsExec(c *cli, cl *layerfs.Client, id string, argv []string) error {
	if len(argv) == 0 {
		return fmt.Errorf("%w: layerfs ws exec ID -- ARGV...", errUsage)
	}
	req := api.ExecRequest{Argv: argv, Cwd: wsFlags.cwd, Env: wsFlags.env, IsolateNetwork: wsFlags.isolate,
		TimeoutMS: timeoutMS(wsFlags.timeout)}
	if wsFlags.stdin {
		// Passed whole, in the request (api.MaxBody), as text or base64.
		const most = api.MaxBody / 2
		data, err := io.ReadAll(io.LimitReader(os.Stdin, most+1))
		if err != nil {
			return fmt.Errorf("read stdin: %w", err)
		}
		if len(data) > most {
			return fmt.Errorf("%w: --stdin takes at most %d MiB, read whole before the command starts: put more in the Workspace (its host path) and read it from there", errUsage, most>>20)
		}
		// Big input as base64, whose size is known (4/3): escaped
		// text can take up to six times its own.
		if utf8.Valid(data) && len(data) <= 1<<20 {
			req.Stdin = string(data)
		} else {
			req.StdinBase64 = base64.StdEncoding.EncodeToString(data)
		}
	}
	if c.json {
		res, err := cl.Exec(context.Background(), id, req)
		if err != nil {
			return err
		}
		if err := c.printJSON(res); err != nil {
			return err
		}
		if res.ExitCode != 0 {
			return &exitStatus{res.ExitCode}
		}
		return nil
	}
	res, err := cl.ExecStream(context.Background(), id, req, func(ev api.ExecEvent) {
		if ev.Stream == "stderr" {
			c.errOut.Write(ev.Bytes())
		} else {
			c.out.Write(ev.Bytes())
		}
	})
	if err != nil {
		return err
	}
	if res.TimedOut {
		fmt.Fprintf(c.errOut, "layerfs ws exec: timed out after %s\n", wsFlags.timeout)
	}
	if res.ExitCode != 0 {
		return &exitStatus{res.ExitCode}
	}
	return nil
}

// timeoutMS is --timeout in the API's milliseconds, rounded up: one
// shorter than a millisecond is not 0, which is none.
func timeoutMS(d time.Duration) int64 {
	if d%time.Millisecond > 0 {
		return d.Milliseconds() + 1
	}
	return d.Milliseconds()
}

func printDiscard(c *cli, res api.DiscardResult) {
	fmt.Fprintf(c.out, "%s: changes discarded\n", res.Workspace.ID)
	if res.EndedCommands > 0 {
		fmt.Fprintf(c.out, "ended %d process(es) still running there\n", res.EndedCommands)
	}
	var ignored int
	for _, k := range res.Kept {
		if k.Why == api.UncommittedIgnored {
			ignored++
		}
	}
	if ignored > 0 {
		fmt.Fprintf(c.out, "kept %d ignored path(s) (/.layerfsignore); --all discards them too\n", ignored)
	}
	printUncommitted(c, res.Kept, res.Dropped, "its Commit")
}

// printUncommitted prints what a commit or discard kept and dropped of
// what a Store does not hold. Ignored paths are meant to stay out; the
// rest is worth a line.
func printUncommitted(c *cli, kept, dropped []api.UncommittedPath, commit string) {
	var special []string
	for _, k := range kept {
		if k.Why == api.UncommittedSpecial {
			special = append(special, k.Path)
		}
	}
	if len(special) > 0 {
		fmt.Fprintf(c.out, "not committed (a Store holds no FIFO, socket or device), kept in the Workspace: %s\n", quoteNames(special, " "))
	}
	if len(dropped) > 0 {
		parts := make([]string, len(dropped))
		for i, d := range dropped {
			parts[i] = fmt.Sprintf("%s (%s)", quoteName(d.Path), d.Why)
		}
		fmt.Fprintf(c.out, "not committed, and gone from the Workspace (its directory is not one in %s): %s\n", commit, strings.Join(parts, " "))
	}
}

// exitStatus passes a command's exit code through as layerfs's own.
type exitStatus struct{ code int }

func (e *exitStatus) Error() string { return fmt.Sprintf("command exited with status %d", e.code) }

func wsCommit(c *cli, cl *layerfs.Client, id string) error {
	res, err := cl.Commit(context.Background(), id, api.CommitRequest{Message: wsFlags.message, Force: wsFlags.force, AllowRunning: wsFlags.allowRunning})
	if err != nil {
		return err
	}
	if c.json {
		if err := c.printJSON(res); err != nil {
			return err
		}
	} else {
		r := res.Receipt
		switch res.Status {
		case api.StatusCommitted:
			fmt.Fprintf(c.out, "committed %.12s on %s\n", res.Commit, res.Workspace.Branch)
		case api.StatusUpToDate:
			fmt.Fprintf(c.out, "up-to-date: nothing to commit; %s is at %.12s\n", res.Workspace.Branch, res.Head)
		case api.StatusConflict:
			fmt.Fprintf(c.out, "conflict with head %.12s: %s\n", res.Head, quoteNames(res.Paths, " "))
			if len(res.Markers) > 0 {
				fmt.Fprintf(c.out, "marker blocks written into: %s; fix them and commit again\n", quoteNames(res.Markers, " "))
			}
			if len(res.Workspace.Unsettled) > 0 {
				fmt.Fprintf(c.out, "kept this Workspace's version of: %s; write the version to keep (or restore the head's), or commit --force to replace the head's\n",
					quoteNames(res.Workspace.Unsettled, " "))
			}
		}
		if len(res.Merged) > 0 {
			fmt.Fprintf(c.out, "merged line by line: %s\n", quoteNames(res.Merged, " "))
		}
		for _, d := range res.LWW {
			fmt.Fprintf(c.out, "lww: %s taken from %s\n", quoteName(d.Path), d.Winner)
		}
		printUncommitted(c, res.Kept, res.Dropped, "the head")
		fmt.Fprintf(c.out, "%s, %d bytes hashed, %d objects new, %d reused, %d bytes stored; %.1f ms (capture %.1f, lock %.1f, remount %.1f)\n",
			plural(r.PathsCaptured, "path"), r.BytesHashed, r.ObjectsNew, r.ObjectsReused, r.BytesStored, r.TotalMS, r.CaptureMS, r.LockMS, r.RemountMS)
	}
	if res.Status == api.StatusConflict {
		return fmt.Errorf("%w: %s", errConflict, quoteNames(res.Paths, ", "))
	}
	return nil
}

// plural is "1 commit", "2 commits".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
