package main

import (
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/layerfs/layerfs"
	"github.com/layerfs/layerfs/publish"
	"github.com/layerfs/layerfs/store"
)

// fsVerbs are the file calls: layerfs fs VERB. Each lives in its own file
// (fs_read.go, fs_write.go, ...) and registers itself here.
var fsVerbs = map[string]*command{}

var fsCommand = &command{
	name:    "fs",
	args:    "VERB ARGS",
	summary: "file calls on a branch: read, write, edit, rm, mv, mkdir, ls, stat",
	verbs:   fsVerbs,
	run:     runFS,
}

func init() { register(fsCommand) }

func registerFS(v *command) {
	fsVerbs[v.name] = v
	v.name = "fs " + v.name
	fsCommand.help = fsHelp()
}

func fsHelp() string {
	var sb strings.Builder
	sb.WriteString(`Runs one file call straight against the Store, in this process. On a branch
every mutating call is one atomic Commit; on a commit or layer the files are
read-only. Run layerfs fs VERB --help for a verb's flags.

Verbs:
`)
	names := make([]string, 0, len(fsVerbs))
	for n := range fsVerbs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&sb, "  %-6s %-34s %s\n", n, fsVerbs[n].args, fsVerbs[n].summary)
	}
	sb.WriteString(fsTargetHelp + "\n" + fsResultHelp)
	return sb.String()
}

const fsTargetHelp = `
[REF:]PATH names a path in a ref: a branch (the default is main), a commit id
or unique prefix, a layer (L<n>), each optionally with ~N. A PATH that
contains ':' needs the REF: prefix. Paths are relative and clean: no '..',
no leading '/', no empty components.`

const fsResultHelp = `
A mutating call prints how it ended: committed (with the new commit), up-to-date
(nothing changed: no commit), or conflict: a path the call touches changed on
the branch since the call's base (the commit the call read; --base sets it),
named with the head it met. Nothing is written on a conflict; read again and
retry. Exit codes: 0 committed or up-to-date, 4 conflict (see layerfs --help).`

func runFS(c *cli, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: layerfs fs VERB: want one of %s", errUsage, strings.Join(sortedVerbs(), ", "))
	}
	return fmt.Errorf("%w: unknown fs verb %q: want one of %s", errUsage, args[0], strings.Join(sortedVerbs(), ", "))
}

func sortedVerbs() []string {
	var out []string
	for n := range fsVerbs {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// splitTarget reads [REF:]PATH; REF defaults to main.
func splitTarget(s string) (ref, path string) {
	ref, path, ok := strings.Cut(s, ":")
	if !ok {
		return "main", s
	}
	return ref, path
}

// needPath refuses an empty PATH, which would name the root: no verb but
// stat (and ls) takes the root, and "read : is a directory" helps nobody.
func needPath(arg, path string) error {
	if path == "" {
		return fmt.Errorf("%w: %q names no path: want [REF:]PATH", errUsage, arg)
	}
	return nil
}

// fsTarget takes the one [REF:]PATH argument of an fs verb and opens an
// FS on its ref.
func fsTarget(c *cli, args []string) (*layerfs.FS, string, error) {
	if err := c.want(args, 1, 1); err != nil {
		return nil, "", err
	}
	ref, path := splitTarget(args[0])
	f, err := openFS(c, ref)
	return f, path, err
}

// openFS opens the Store and an FS on ref.
func openFS(c *cli, ref string) (*layerfs.FS, error) {
	st, err := c.open(false)
	if err != nil {
		return nil, err
	}
	return st.FS(ref)
}

// callFlags are the flags every mutating verb takes.
var callFlags struct{ id, message, base string }

func addCallFlags(c *cli) {
	c.fs.StringVar(&callFlags.id, "id", "", "operation `ID`: the commit's origin is operation:ID (default: random)")
	c.fs.StringVar(&callFlags.message, "message", "", "commit `MESSAGE` (default: a summary of the call)")
	c.fs.StringVar(&callFlags.base, "base", "", "the `COMMIT` the call was made against (default: the branch head now)")
	c.jsonFlag()
}

// call builds the Call the flags describe.
func call(c *cli) (layerfs.Call, error) {
	cl := layerfs.Call{ID: callFlags.id, Message: callFlags.message}
	if callFlags.base == "" {
		return cl, nil
	}
	r, err := c.st.Backend().Resolve(callFlags.base)
	if err != nil {
		return cl, fmt.Errorf("--base: %w", err)
	}
	cl.Base = r.Commit
	return cl, nil
}

// mutate runs one mutating call on the branch ref names and reports it.
func mutate(c *cli, ref string, fn func(f *layerfs.FS, cl layerfs.Call) (*layerfs.Result, error)) error {
	f, err := openFS(c, ref)
	if err != nil {
		return err
	}
	cl, err := call(c)
	if err != nil {
		return err
	}
	res, err := fn(f, cl)
	if err != nil {
		return err
	}
	return report(c, ref, res)
}

type resultJSON struct {
	Status string   `json:"status"`
	Branch string   `json:"branch"`
	Commit string   `json:"commit,omitempty"`
	Head   string   `json:"head"`
	Paths  []string `json:"paths,omitempty"`
	// Merged lists the paths both sides changed whose edits merged line
	// by line; LWW how /.lww settled paths both sides changed.
	Merged     []string            `json:"merged,omitempty"`
	LWW        []store.LWWDecision `json:"lww,omitempty"`
	AuditError string              `json:"audit_error,omitempty"`
}

// report prints a call's result; a Conflict is also an error (exit 4) that
// names the paths and the head.
func report(c *cli, branch string, res *layerfs.Result) error {
	j := resultJSON{Status: res.Status.String(), Branch: branch, Head: res.Head.String(), Paths: res.Paths, LWW: res.LWW}
	if res.Status == publish.Committed {
		j.Commit = res.Commit.String()
	}
	for _, m := range res.Merged {
		j.Merged = append(j.Merged, m.Path)
	}
	if res.AuditErr != nil {
		j.AuditError = res.AuditErr.Error()
		fmt.Fprintf(c.errOut, "layerfs %s: warning: the commit stands, but its line owners were not recorded (blame works them out from history): %v\n", c.cmd.name, res.AuditErr)
	}
	if c.json {
		if err := c.printJSON(j); err != nil {
			return err
		}
	}
	switch res.Status {
	case publish.Committed:
		if !c.json {
			fmt.Fprintf(c.out, "committed %s on %s\n", res.Commit.Short(), branch)
			if len(j.Merged) > 0 {
				fmt.Fprintf(c.out, "merged line by line with changes on %s: %s\n", branch, strings.Join(j.Merged, ", "))
			}
			for _, d := range res.LWW {
				fmt.Fprintf(c.out, "%s: the newer side won (%s, /.lww)\n", d.Path, d.Winner)
			}
		}
	case publish.UpToDate:
		if !c.json {
			fmt.Fprintf(c.out, "up-to-date: nothing changed; %s is at %s\n", branch, res.Head.Short())
		}
	case publish.Conflict:
		return fmt.Errorf("%w: %s changed on %s since the call's base; head is %s: read it and try again",
			errConflict, strings.Join(res.Paths, ", "), branch, res.Head.Short())
	}
	return nil
}

// fileJSON describes one path for fs stat and fs ls.
type fileJSON struct {
	Path   string    `json:"path"`
	Name   string    `json:"name"`
	Type   string    `json:"type"`
	Mode   string    `json:"mode"`
	UID    uint32    `json:"uid"`
	GID    uint32    `json:"gid"`
	Size   int64     `json:"size"`
	MTime  time.Time `json:"mtime"`
	ID     string    `json:"id,omitempty"`
	Target string    `json:"target,omitempty"`
	// A path or target whose bytes are not UTF-8 reads in JSON with
	// U+FFFD in their place; these hold its bytes, to name it back.
	PathBase64   string `json:"path_base64,omitempty"`
	TargetBase64 string `json:"target_base64,omitempty"`
}

func toFileJSON(fi *layerfs.FileInfo) fileJSON {
	j := fileJSON{Path: fi.Path, Name: fi.Name, Type: fi.Kind, Mode: fmt.Sprintf("%04o", fi.Mode), UID: fi.UID, GID: fi.GID,
		Size: fi.Size, MTime: fi.MTime.UTC(), Target: fi.Target}
	if !fi.ID.IsZero() {
		j.ID = fi.ID.String()
	}
	if !utf8.ValidString(fi.Path) {
		j.PathBase64 = base64.StdEncoding.EncodeToString([]byte(fi.Path))
	}
	if !utf8.ValidString(fi.Target) {
		j.TargetBase64 = base64.StdEncoding.EncodeToString([]byte(fi.Target))
	}
	return j
}

// stdin is what fs write reads; tests replace it.
var stdin io.Reader = os.Stdin
