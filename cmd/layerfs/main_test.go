package main

import (
	"bytes"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runCLI runs one command line in-process.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errs := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("layerfs %s: exit %d: %s", strings.Join(args, " "), code, errs)
	}
	return out
}

func testTree(t *testing.T) string {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "src/pkg"), 0o755)
	os.WriteFile(filepath.Join(dir, "src/pkg/a.go"), []byte("package pkg\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "README"), []byte("hi\n"), 0o644)
	os.Symlink("README", filepath.Join(dir, "link"))
	return dir
}

func TestCLIEndToEnd(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.layerfs")
	src := testTree(t)
	out := mustRun(t, "init", "--store", store, src)
	if !strings.Contains(out, "main ") || !strings.Contains(out, "2 files") {
		t.Errorf("init output: %q", out)
	}
	t.Setenv("LAYERFS_STORE", store)
	if got := mustRun(t, "cat", "main:src/pkg/a.go"); got != "package pkg\n" {
		t.Errorf("cat: %q", got)
	}
	if got := mustRun(t, "ls", "main"); got != "README\nlink -> README\nsrc/\n" {
		t.Errorf("ls: %q", got)
	}
	var entries []map[string]any
	if err := json.Unmarshal([]byte(mustRun(t, "ls", "--json", "main:src/pkg")), &entries); err != nil || len(entries) != 1 || entries[0]["name"] != "a.go" {
		t.Errorf("ls --json: %v %v", entries, err)
	}
	mustRun(t, "branch", "fork", "agent-1", "main")
	if got := mustRun(t, "branch", "list"); !strings.Contains(got, "agent-1") || !strings.Contains(got, "main") {
		t.Errorf("branch list: %q", got)
	}
	if got := mustRun(t, "log", "agent-1"); !strings.Contains(got, "init") {
		t.Errorf("log: %q", got)
	}
	dst := filepath.Join(t.TempDir(), "out")
	mustRun(t, "export", "L1", dst)
	if data, _ := os.ReadFile(filepath.Join(dst, "README")); string(data) != "hi\n" {
		t.Errorf("export: %q", data)
	}
	dst = filepath.Join(t.TempDir(), "out")
	mustRun(t, "export", "L1:/", dst) // a trailing slash, as ls takes it
	if data, _ := os.ReadFile(filepath.Join(dst, "README")); string(data) != "hi\n" {
		t.Errorf("export L1:/: %q", data)
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(mustRun(t, "stats", "--json")), &st); err != nil || st["branches"].(float64) != 2 {
		t.Errorf("stats --json: %v %v", st, err)
	}
	if got := mustRun(t, "fsck", "--json"); !strings.Contains(got, `"problems": []`) {
		t.Errorf("fsck --json: %q", got)
	}
	if got := mustRun(t, "fsck"); !strings.Contains(got, "sound") {
		t.Errorf("fsck: %q", got)
	}
	mustRun(t, "branch", "delete", "agent-1")
}

func TestCLIErrors(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.layerfs")
	mustRun(t, "init", "--store", store, testTree(t))
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"nope"}, exitUsage, "unknown command"},
		{[]string{"cat", "--store", store, "nope:README"}, exitNotFound, `unknown ref "nope"`},
		{[]string{"cat", "--store", store, "main:missing"}, exitNotFound, "missing"},
		{[]string{"cat", "--store", store, "main:../etc/passwd"}, exitUsage, ".."},
		{[]string{"cat", "--store", store, "main:src"}, exitUsage, "directory"},
		{[]string{"init", "--store", store, "/nonexistent-dir"}, exitNotFound, "/nonexistent-dir"},
		{[]string{"ls", "--store", filepath.Join(t.TempDir(), "none"), "main"}, exitNotFound, "layerfs init"},
		{[]string{"log", "--store", "/nonexistent-dir/x.layerfs", "main"}, exitNotFound, "layerfs init"},
		{nil, exitUsage, "Usage: layerfs"},
		{[]string{"--store", store, "log", "main"}, exitUsage, "flags go after"},
		{[]string{"ws", "bogus", "x"}, exitUsage, "unknown ws subcommand"},
		{[]string{"ws", "create", "main"}, exitUsage, "--branch B"},
		{[]string{"ws", "ls", "x"}, exitUsage, "takes no arguments"},
		{[]string{"ws", "end", "ws-1", "ws-2"}, exitUsage, "takes one ID"},
		{[]string{"ws", "commit"}, exitUsage, "layerfs ws commit ID"},
		{[]string{"ws", "ls", "--socket", "/nonexistent-dir/d.sock"}, exitError, "no daemon listening on /nonexistent-dir/d.sock"},
		{[]string{"ws", "commit", "ws-1", "--discard"}, exitUsage, "ws commit does not take --discard"},
		{[]string{"ws", "exec", "ws-1", "--branch", "x", "--", "true"}, exitUsage, "does not take --branch"},
		{[]string{"ws", "exec", "ws-1", "--timeout", "-1s", "--", "true"}, exitUsage, "--timeout -1s"},
		{[]string{"daemon", "--store", store, "--max-workspaces", "0"}, exitUsage, "--max-workspaces 0"},
		{[]string{"daemon", "--store", store, "--volume-size", "0"}, exitUsage, "--volume-size 0"},
		{[]string{"fs", "read", "--store", store, "main:"}, exitUsage, "names no path"},
		{[]string{"fs", "rm", "--store", store, ""}, exitUsage, "names no path"},
		{[]string{"export", "--store", store, "main", store}, exitUsage, "not a directory"},
		{[]string{"ls", "--store", store, "src"}, exitNotFound, "main:src"},
		{[]string{"-version"}, exitUsage, "--version"},
		{[]string{"fs", "mkdir", "--store", store, "--id", "a\nb", "newdir"}, exitUsage, "printable"},
		{[]string{"log", "--store", store, "-n", "-1", "main"}, exitUsage, "-n -1"},
		{[]string{"log", "--store", store, "--stat", "--name-status", "main"}, exitUsage, "not both"},
		{[]string{"cat", "--store", store, "main:src/pkg"}, exitUsage, "layerfs ls main:src/pkg"},
		{[]string{"branch", "--store", store, "fork", "../x", "main"}, exitUsage, "must start with"},
		{[]string{"mount", "--store", store, "main", "/nonexistent-dir"}, exitNotFound, "mount point /nonexistent-dir does not exist"},
		{[]string{"mount", "--store", store, "main", store}, exitUsage, "not a directory"},
		{[]string{"ls", "--store", "/proc/x.layerfs", "main"}, exitUnsupported, "proc"},
		{[]string{"branch", "--store", store, "fork", "main", "main"}, exitConflict, "exists"},
		{[]string{"branch", "--store", store, "fork", "a b", "main"}, exitUsage, "branch name"},
		{[]string{"log", "--store", store}, exitUsage, "usage"},
		{[]string{"ls", "main"}, exitUsage, "LAYERFS_STORE"},
	} {
		t.Setenv("LAYERFS_STORE", "")
		t.Setenv("LAYERFS_SOCKET", "")
		code, _, stderr := runCLI(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.msg) {
			t.Errorf("layerfs %s: exit %d %q; want exit %d mentioning %q", strings.Join(c.args, " "), code, stderr, c.code, c.msg)
		}
	}
}

func TestCLIHelp(t *testing.T) {
	for name, cmd := range commands {
		out := mustRun(t, name, "--help")
		if !strings.Contains(out, "Usage: layerfs "+name) || strings.Contains(out, "-store") == cmd.noStore {
			t.Errorf("%s --help (opens a Store: %v): %q", name, !cmd.noStore, out)
		}
	}
	if out := mustRun(t, "--help"); !strings.Contains(out, "export") {
		t.Errorf("--help: %q", out)
	}
}

// TestCLIMalformedStoreIsCorrupt: when SQLite itself finds the Store's
// file damaged ("database disk image is malformed"), the exit code says
// the Store is damaged (5), as --help promises, not a generic failure. It
// garbles one page of a copy at a time and looks at every fsck that says
// so.
func TestCLIMalformedStoreIsCorrupt(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "s.layerfs")
	mustRun(t, "init", "--store", store, testTree(t))
	data, err := os.ReadFile(store)
	if err != nil {
		t.Fatal(err)
	}
	const page = 4096
	malformed := 0
	for off := page; off+page <= len(data); off += page {
		bad := append([]byte(nil), data...)
		copy(bad[off:], "\x0d\xff\xff\xff\xff\xff\xff\xff") // a leaf page header with nonsense counts
		path := filepath.Join(dir, "bad.layerfs")
		os.Remove(path + "-wal")
		os.Remove(path + "-shm")
		if err := os.WriteFile(path, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := runCLI(t, "fsck", "--store", path)
		if strings.Contains(stderr, "malformed") {
			malformed++
			if code != exitCorrupt {
				t.Errorf("page at %d: exit %d for %q, want %d", off, code, stderr, exitCorrupt)
			}
		}
	}
	if malformed == 0 {
		t.Fatal("no garbled page made SQLite say the file is malformed; the test checks nothing")
	}
}

// TestCLIMissingObjectIsCorrupt: an object the Store names but no longer
// holds (here a file's chunk, deleted behind the Store's back) makes
// export fail with exit 5, the Store is damaged, not 3, not found.
func TestCLIMissingObjectIsCorrupt(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "s.layerfs")
	mustRun(t, "init", "--store", store, testTree(t))
	var entries []struct {
		Name string `json:"name"`
		ID   string `json:"id"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, "ls", "--store", store, "--json", "main")), &entries); err != nil {
		t.Fatal(err)
	}
	id := ""
	for _, e := range entries {
		if e.Name == "README" {
			id = e.ID
		}
	}
	raw, err := hex.DecodeString(id)
	if err != nil || len(raw) != 32 {
		t.Fatalf("README's id %q", id)
	}
	deleteObject(t, store, raw)
	code, _, stderr := runCLI(t, "export", "--store", store, "main", filepath.Join(dir, "out"))
	if code != exitCorrupt || !strings.Contains(stderr, "missing from the Store") {
		t.Errorf("export with a chunk missing: exit %d %q, want %d", code, stderr, exitCorrupt)
	}
}

// TestCLIInitLeavesOutItsStore: a Store inside the tree it captures is
// left out (it changes as init writes it), and said so; --json reads as
// the other commands' JSON does.
func TestCLIInitLeavesOutItsStore(t *testing.T) {
	dir := testTree(t)
	store := filepath.Join(dir, ".layerfs.db")
	code, out, stderr := runCLI(t, "init", "--json", "--store", store, dir)
	if code != 0 {
		t.Fatalf("init: exit %d %s", code, stderr)
	}
	var res struct {
		Commit     string   `json:"commit"`
		Files      int      `json:"files"`
		Excluded   []string `json:"excluded"`
		DurationMS float64  `json:"duration_ms"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("init --json: %v\n%s", err, out)
	}
	if len(res.Commit) != 64 || res.Files != 2 || len(res.Excluded) == 0 || res.Excluded[0] != ".layerfs.db" {
		t.Errorf("init --json: %+v", res)
	}
	if !strings.Contains(stderr, "left out .layerfs.db") {
		t.Errorf("init's warning: %q", stderr)
	}
	if got := mustRun(t, "ls", "--store", store, "main"); strings.Contains(got, "layerfs.db") {
		t.Errorf("the Store was captured:\n%s", got)
	}
}

// fullWriter fails every write, as /dev/full does.
type fullWriter struct{}

func (fullWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// TestCLIOutputThatCannotBeWritten: a command whose output cannot be
// written fails (exit 1) and says so, whichever way it prints.
func TestCLIOutputThatCannotBeWritten(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.layerfs")
	mustRun(t, "init", "--store", store, testTree(t))
	for _, args := range [][]string{{"log", "main"}, {"stats"}, {"fsck"}, {"ls", "main"}, {"blame", "main:README"}} {
		var errb bytes.Buffer
		code := run(append(append([]string{}, args...), "--store", store), fullWriter{}, &errb)
		if code != exitError || !strings.Contains(errb.String(), "no space left on device") {
			t.Errorf("layerfs %s > /dev/full: exit %d %q", strings.Join(args, " "), code, errb.String())
		}
	}
}

func TestCLIHelpOfACommandAndVersion(t *testing.T) {
	if code, out, _ := runCLI(t, "help", "log"); code != 0 || !strings.HasPrefix(out, "Usage: layerfs log") {
		t.Errorf("help log: exit %d %q", code, out)
	}
	if code, _, errs := runCLI(t, "help", "nope"); code != exitUsage || !strings.Contains(errs, `no command "nope"`) {
		t.Errorf("help nope: exit %d %q", code, errs)
	}
	if code, out, _ := runCLI(t, "--version"); code != 0 || !strings.HasPrefix(out, "layerfs ") {
		t.Errorf("--version: exit %d %q", code, out)
	}
	if code, out, _ := runCLI(t, "help", "fs", "write"); code != 0 || !strings.HasPrefix(out, "Usage: layerfs fs write") {
		t.Errorf("help fs write: exit %d %q", code, out)
	}
	for _, args := range [][]string{{"--help"}, {"--version"}, {"help", "init"}, {"init", "--help"}} {
		var errb bytes.Buffer
		if code := run(args, fullWriter{}, &errb); code != exitError {
			t.Errorf("layerfs %s > /dev/full: exit %d %q", strings.Join(args, " "), code, errb.String())
		}
	}
}

// TestCLIInitThroughASymlink: a symlink to the tree is followed (none
// below it is); init had refused it after making an empty Store.
func TestCLIInitThroughASymlink(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "link")
	if err := os.Symlink(testTree(t), link); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(dir, "s.layerfs")
	mustRun(t, "init", "--store", store, link)
	if got := mustRun(t, "cat", "--store", store, "main:README"); got != "hi\n" {
		t.Errorf("README through the symlinked tree: %q", got)
	}
	if got := mustRun(t, "ls", "--store", store, "main"); !strings.Contains(got, "link -> README") {
		t.Errorf("the symlink inside the tree must stay one:\n%s", got)
	}
}

// TestCLISmallThings: -n1, a trailing slash on ls, branch delete says so,
// branch list takes no more arguments.
func TestCLISmallThings(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.layerfs")
	mustRun(t, "init", "--store", store, testTree(t))
	t.Setenv("LAYERFS_STORE", store)
	if out := mustRun(t, "log", "-n1", "main"); strings.Count(out, "\n") != 1 {
		t.Errorf("log -n1:\n%s", out)
	}
	if out := mustRun(t, "ls", "main:src/"); out != "pkg/\n" {
		t.Errorf("ls main:src/: %q", out)
	}
	mustRun(t, "branch", "fork", "x", "main")
	if out := mustRun(t, "branch", "delete", "x"); !strings.HasPrefix(out, "deleted branch x (was ") {
		t.Errorf("branch delete: %q", out)
	}
	if code, _, _ := runCLI(t, "branch", "list", "extra"); code != exitUsage {
		t.Errorf("branch list extra: exit %d", code)
	}
}

// TestCLILogWithAMissingAncestor: log prints what it could read, then
// fails saying where history stops.
func TestCLILogWithAMissingAncestor(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "s.layerfs")
	mustRun(t, "init", "--store", store, testTree(t))
	code, _, errs := runWithStdin(t, "two\n", "fs", "write", "--store", store, "README")
	if code != 0 {
		t.Fatalf("fs write: %d %s", code, errs)
	}
	var log []struct {
		Commit string `json:"commit"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, "log", "--store", store, "--json", "main")), &log); err != nil || len(log) != 2 {
		t.Fatalf("log --json: %v %d", err, len(log))
	}
	raw, _ := hex.DecodeString(log[1].Commit) // init's commit
	deleteObject(t, store, raw)
	code, out, stderr := runCLI(t, "log", "--store", store, "main")
	if code != exitCorrupt || strings.Count(out, "\n") != 1 || !strings.Contains(out, log[0].Commit[:12]) || !strings.Contains(stderr, "stops after 1 commit(s)") {
		t.Errorf("log with init's commit missing: exit %d\n%s%s", code, out, stderr)
	}
}

// deleteObject removes object id from the Store's file behind the
// Store's back, as damage would.
func deleteObject(t *testing.T, store string, id []byte) {
	t.Helper()
	db, err := sql.Open("sqlite", store)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("DROP TRIGGER objects_append_only_delete"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("DELETE FROM objects WHERE id = ?", id); err != nil {
		t.Fatal(err)
	}
}

// TestCLIBranchDeleteSaysTheHead: delete names the head the branch had, the
// only record of it left, so that a branch deleted by mistake can be forked
// again from it.
func TestCLIBranchDeleteSaysTheHead(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.layerfs")
	mustRun(t, "init", "--store", store, testTree(t))
	t.Setenv("LAYERFS_STORE", store)
	mustRun(t, "branch", "fork", "work", "main")
	code, out, stderr := runWithStdin(t, "new\n", "fs", "write", "--json", "work:new.txt")
	if code != 0 {
		t.Fatalf("fs write: exit %d %s", code, stderr)
	}
	var res struct{ Commit string }
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Commit) != 64 {
		t.Fatalf("fs write --json: %v %q", err, out)
	}
	if got, want := mustRun(t, "branch", "delete", "work"), "deleted branch work (was "+res.Commit[:12]+")\n"; got != want {
		t.Errorf("branch delete: %q, want %q", got, want)
	}
	mustRun(t, "branch", "fork", "work", res.Commit[:12])
	if got := mustRun(t, "cat", "work:new.txt"); got != "new\n" {
		t.Errorf("new.txt after the fork: %q", got)
	}
}
