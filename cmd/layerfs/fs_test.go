package main

import (
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// newCLIStore inits testTree into a fresh Store and points LAYERFS_STORE at it.
func newCLIStore(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.layerfs")
	mustRun(t, "init", "--store", path, testTree(t))
	t.Setenv("LAYERFS_STORE", path)
	t.Cleanup(func() {
		if code, out, errs := runCLI(t, "fsck", "--store", path); code != 0 {
			t.Errorf("fsck after test: exit %d: %s %s", code, out, errs)
		}
	})
	return path
}

// runWithStdin runs one command line with input as its stdin.
func runWithStdin(t *testing.T, input string, args ...string) (int, string, string) {
	t.Helper()
	old := stdin
	stdin = strings.NewReader(input)
	defer func() { stdin = old }()
	return runCLI(t, args...)
}

func mustJSON(t *testing.T, out string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("bad JSON %q: %v", out, err)
	}
}

func TestFSWriteReadStatLs(t *testing.T) {
	newCLIStore(t)
	code, out, errs := runWithStdin(t, "hello\n", "fs", "write", "main:docs/a.txt", "--id", "w1", "--message", "add a")
	if code != exitOK || !strings.HasPrefix(out, "committed ") || !strings.HasSuffix(out, " on main\n") {
		t.Fatalf("write: exit %d %q %q", code, out, errs)
	}
	if got := mustRun(t, "fs", "read", "docs/a.txt"); got != "hello\n" {
		t.Errorf("read: %q", got)
	}
	code, out, _ = runWithStdin(t, "hello\n", "fs", "write", "docs/a.txt", "--json")
	var res resultJSON
	mustJSON(t, out, &res)
	if code != exitOK || res.Status != "up-to-date" || res.Commit != "" || len(res.Head) != 64 {
		t.Errorf("same content again: exit %d %+v", code, res)
	}
	var rd readJSON
	mustJSON(t, mustRun(t, "fs", "read", "--json", "main:docs/a.txt"), &rd)
	if rd.Text != "hello\n" || rd.Commit != res.Head || rd.Size != 6 {
		t.Errorf("read --json: %+v, head %s", rd, res.Head)
	}
	runWithStdin(t, "\x00\x01", "fs", "write", "bin")
	rd = readJSON{}
	mustJSON(t, mustRun(t, "fs", "read", "--json", "bin"), &rd)
	if rd.Base64 != "AAE=" || rd.Text != "" {
		t.Errorf("binary read --json: %+v", rd)
	}
	if got := mustRun(t, "fs", "stat", "docs/a.txt"); !strings.HasPrefix(got, "file -rw-r--r-- 6 ") || !strings.HasSuffix(got, " docs/a.txt\n") {
		t.Errorf("stat: %q", got)
	}
	var st statJSON
	mustJSON(t, mustRun(t, "fs", "stat", "--json", "main:docs"), &st)
	if st.Type != "dir" || st.Path != "docs" || st.Commit == "" {
		t.Errorf("stat --json: %+v", st)
	}
	if got := mustRun(t, "fs", "ls"); got != "file     3  README\nfile     2  bin\ndir      -  docs/\nsymlink  6  link -> README\ndir      -  src/\n" {
		t.Errorf("ls:\n%s", got)
	}
	if got := mustRun(t, "fs", "ls", "main:docs/"); got != mustRun(t, "fs", "ls", "main:docs") { // a trailing slash, as ls takes it
		t.Errorf("ls main:docs/:\n%s", got)
	}
	if got := mustRun(t, "fs", "ls", "main:/"); got != mustRun(t, "fs", "ls") {
		t.Errorf("ls main:/:\n%s", got)
	}
	var list []fileJSON
	mustJSON(t, mustRun(t, "fs", "ls", "--json", "main:docs"), &list)
	if len(list) != 1 || list[0].Name != "a.txt" || list[0].Size != 6 || list[0].Type != "file" || list[0].Mode != "0644" {
		t.Errorf("ls --json: %+v", list)
	}
	if got := mustRun(t, "fs", "read", "L1:README"); got != "hi\n" {
		t.Errorf("read at a layer: %q", got)
	}
	if got := mustRun(t, "log", "-n", "2", "main"); !strings.Contains(got, "operation:w1") || !strings.Contains(got, "add a") {
		t.Errorf("log after writes: %q", got)
	}
}

func TestFSEditRmMvMkdir(t *testing.T) {
	newCLIStore(t)
	mustRun(t, "fs", "edit", "src/pkg/a.go", "--old", "package pkg", "--new", "package pkg // edited", "--id", "ed")
	if got := mustRun(t, "fs", "read", "src/pkg/a.go"); got != "package pkg // edited\n" {
		t.Errorf("after edit: %q", got)
	}
	runWithStdin(t, "x x x\n", "fs", "write", "t.txt")
	mustRun(t, "fs", "edit", "t.txt", "--old", "x", "--new", "", "--all")
	if got := mustRun(t, "fs", "read", "t.txt"); got != "  \n" {
		t.Errorf("edit --all with empty --new: %q", got)
	}
	mustRun(t, "fs", "mkdir", "main:a/b/c")
	if got := mustRun(t, "fs", "mkdir", "a/b"); !strings.HasPrefix(got, "up-to-date") {
		t.Errorf("mkdir of an existing dir: %q", got)
	}
	mustRun(t, "fs", "mv", "t.txt", "main:a/b/t.txt")
	if got := mustRun(t, "fs", "ls", "main:a/b"); got != "dir   -  c/\nfile  3  t.txt\n" {
		t.Errorf("after mv: %q", got)
	}
	mustRun(t, "fs", "rm", "a/b/t.txt")
	mustRun(t, "fs", "rm", "-r", "a")
	if code, _, _ := runCLI(t, "fs", "stat", "a"); code != exitNotFound {
		t.Errorf("rm -r left a: exit %d", code)
	}
	var log []logJSON
	mustJSON(t, mustRun(t, "log", "--json", "--name-status", "-n", "7", "main"), &log)
	want := []string{"a/b/c:deleted", "a/b/t.txt:deleted", "a/b/t.txt:added t.txt:deleted", "a/b/c:added", "t.txt:modified", "t.txt:added", "src/pkg/a.go:modified"}
	for i, e := range log {
		var got []string
		for _, c := range e.Changes {
			got = append(got, c.Path+":"+c.Kind)
		}
		if strings.Join(got, " ") != want[i] {
			t.Errorf("log entry %d (%s): %v, want %s", i, e.Message, got, want[i])
		}
	}
	if log[6].Origin != "operation:ed" {
		t.Errorf("edit origin: %q", log[6].Origin)
	}
}

// TestFSConflict: a call made against an old base that touches a path
// changed since is refused with exit 4, naming the path and the head.
func TestFSConflict(t *testing.T) {
	newCLIStore(t)
	var first resultJSON
	_, out, _ := runWithStdin(t, "one\n", "fs", "write", "--json", "README")
	mustJSON(t, out, &first)
	base := first.Head[:12] // the commit both calls read
	code, out, errs := runWithStdin(t, "two\n", "fs", "write", "--json", "--base", base, "README")
	var res resultJSON
	mustJSON(t, out, &res)
	if code != exitConflict || res.Status != "conflict" || len(res.Paths) != 1 || res.Paths[0] != "README" || res.Head != first.Commit {
		t.Fatalf("conflict: exit %d %+v (first %+v)", code, res, first)
	}
	if !strings.Contains(errs, "README changed on main") || !strings.Contains(errs, first.Commit[:12]) {
		t.Errorf("conflict message: %q", errs)
	}
	if got := mustRun(t, "fs", "read", "README"); got != "one\n" {
		t.Errorf("the winner's content must stay: %q", got)
	}
	// A path that did not change since the base lands on the newer head.
	code, out, _ = runWithStdin(t, "other\n", "fs", "write", "--base", base, "other.txt")
	if code != exitOK || !strings.HasPrefix(out, "committed") {
		t.Errorf("disjoint write from an old base: exit %d %q", code, out)
	}
}

// TestFSMergedIsListed: a write whose edits merged with the branch's says
// so, in --json (merged) and in words.
func TestFSMergedIsListed(t *testing.T) {
	newCLIStore(t)
	var first resultJSON
	_, out, _ := runWithStdin(t, "1\n2\n3\n4\n5\n", "fs", "write", "--json", "f.txt")
	mustJSON(t, out, &first)
	base := first.Commit
	runWithStdin(t, "ONE\n2\n3\n4\n5\n", "fs", "write", "f.txt")
	code, out, _ := runWithStdin(t, "1\n2\n3\n4\nFIVE\n", "fs", "write", "--json", "--base", base, "f.txt")
	var res resultJSON
	mustJSON(t, out, &res)
	if code != exitOK || res.Status != "committed" || len(res.Merged) != 1 || res.Merged[0] != "f.txt" {
		t.Fatalf("merged write: exit %d %+v", code, res)
	}
	if got := mustRun(t, "fs", "read", "f.txt"); got != "ONE\n2\n3\n4\nFIVE\n" {
		t.Errorf("merged content %q", got)
	}
	runWithStdin(t, "1\n2\nthree\n4\nFIVE\n", "fs", "write", "f.txt")
	_, out, _ = runWithStdin(t, "ONE\n2\n3\nfour\nFIVE\n", "fs", "write", "--base", res.Commit, "f.txt")
	if !strings.Contains(out, "merged line by line with changes on main: f.txt") {
		t.Errorf("merged write, in words: %q", out)
	}
}

func TestFSErrors(t *testing.T) {
	newCLIStore(t)
	runWithStdin(t, "x x\n", "fs", "write", "twice.txt")
	head := mustRun(t, "log", "-n", "1", "main")
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"fs", "write", "main:../x"}, exitUsage, "'..'"},
		{[]string{"fs", "write", "/etc/x"}, exitUsage, "absolute"},
		{[]string{"fs", "write", "a//b"}, exitUsage, "empty"},
		{[]string{"fs", "edit", "twice.txt", "--old", "", "--new", "y"}, exitUsage, "the text to replace is empty"},
		{[]string{"fs", "write", strings.Repeat(strings.Repeat("d", 200)+"/", 21) + "f"}, exitUsage, "PATH_MAX"}, // 4222 bytes
		{[]string{"fs", "write", "nope:x"}, exitNotFound, `unknown ref "nope"`},
		{[]string{"fs", "read", "nope:README"}, exitNotFound, `unknown ref "nope"`},
		{[]string{"fs", "write", "README/x"}, exitUsage, "parent README is a file"},
		{[]string{"fs", "write", "src"}, exitUsage, "is a directory"},
		{[]string{"fs", "write", "L1:x"}, exitUsage, "read-only"},
		{[]string{"fs", "edit", "twice.txt", "--old", "nope", "--new", "y"}, exitNotFound, "text not found"},
		{[]string{"fs", "edit", "twice.txt", "--old", "x", "--new", "y"}, exitConflict, "occurs 2 times"},
		{[]string{"fs", "edit", "src", "--old", "x", "--new", "y"}, exitUsage, "is a directory"},
		{[]string{"fs", "edit", "twice.txt", "--old", "x"}, exitUsage, "--new"},
		{[]string{"fs", "edit", "missing.txt", "--old", "x", "--new", "y"}, exitNotFound, "missing.txt"},
		{[]string{"fs", "rm", "missing.txt"}, exitNotFound, "delete missing.txt: not found"},
		{[]string{"fs", "rm", "src"}, exitUsage, "-r"},
		{[]string{"fs", "mv", "README", "src"}, exitConflict, "exists"},
		{[]string{"fs", "mv", "README", "L1:x"}, exitUsage, "one branch"},
		{[]string{"fs", "mkdir", "README"}, exitConflict, "exists"},
		{[]string{"fs", "read", "src"}, exitUsage, "is a directory"},
		{[]string{"fs", "read", "missing"}, exitNotFound, "missing"},
		{[]string{"fs", "stat", "README/x"}, exitNotFound, "not a directory"},
		{[]string{"fs", "ls", "main:README"}, exitUsage, "not a directory"},
		{[]string{"fs", "write", "--base", "nope", "x"}, exitNotFound, "--base"},
		{[]string{"fs", "bogus"}, exitUsage, "unknown fs verb"},
		{[]string{"fs", "read"}, exitUsage, "usage"},
		{[]string{"log", "nope"}, exitNotFound, "nope"},
		{[]string{"diff", "main", "nope"}, exitNotFound, "nope"},
		{[]string{"diff", "main"}, exitUsage, "usage"},
		{[]string{"blame", "main:missing"}, exitNotFound, "missing"},
		{[]string{"blame", "main"}, exitUsage, "REF:PATH"},
		{[]string{"blame", "nope:README"}, exitNotFound, "nope"},
		{[]string{"reset", "nobranch", "main"}, exitNotFound, "nobranch"},
		{[]string{"reset", "main", "nope"}, exitNotFound, "nope"},
	} {
		code, _, stderr := runWithStdin(t, "data\n", c.args...)
		if code != c.code || !strings.Contains(stderr, c.msg) {
			t.Errorf("layerfs %s: exit %d %q; want exit %d mentioning %q", strings.Join(c.args, " "), code, stderr, c.code, c.msg)
		}
	}
	if got := mustRun(t, "log", "-n", "1", "main"); got != head {
		t.Errorf("refused calls moved main:\n%s\nwas\n%s", got, head)
	}
}

func TestLogDiffBlameReset(t *testing.T) {
	newCLIStore(t)
	runWithStdin(t, "hi\nthere\n", "fs", "write", "README", "--id", "w1", "--message", "two lines")
	runWithStdin(t, "new\n", "fs", "write", "src/new.txt", "--id", "w2")
	mustRun(t, "fs", "rm", "link", "--id", "w3")
	got := mustRun(t, "log", "--stat", "-n", "3", "main")
	for _, want := range []string{"operation:w1", "two lines", "    modified  README\n    1 path changed: 1 modified\n", "    deleted  link\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("log --stat lacks %q:\n%s", want, got)
		}
	}
	if got := mustRun(t, "log", "--name-status", "-n", "1", "main"); !strings.HasSuffix(got, "    D\tlink\n") {
		t.Errorf("log --name-status: %q", got)
	}
	var plain []logJSON
	mustJSON(t, mustRun(t, "log", "--json", "main"), &plain)
	if len(plain) != 4 || plain[0].Changes != nil || len(plain[3].Parents) != 0 {
		t.Errorf("log --json: %+v", plain)
	}
	diff := mustRun(t, "diff", "main~3", "main")
	for _, want := range []string{"--- a/README\n+++ b/README\n", "@@ -1 +1,2 @@\n hi\n+there\n", "+++ b/src/new.txt\n", "+++ /dev/null\n"} {
		if !strings.Contains(diff, want) {
			t.Errorf("diff lacks %q:\n%s", want, diff)
		}
	}
	if got := mustRun(t, "diff", "--stat", "main~3", "main"); got != "modified  README\ndeleted   link\nadded     src/new.txt\n3 paths changed: 1 added, 1 modified, 1 deleted\n" {
		t.Errorf("diff --stat:\n%s", got)
	}
	var changes []changeJSON
	mustJSON(t, mustRun(t, "diff", "--json", "main~3", "main"), &changes)
	if len(changes) != 3 || changes[2] != (changeJSON{"src/new.txt", "added"}) {
		t.Errorf("diff --json: %+v", changes)
	}
	if got := mustRun(t, "diff", "main", "main"); got != "" {
		t.Errorf("diff of a commit with itself: %q", got)
	}
	// Limited to paths, after the refs or after --.
	if got := mustRun(t, "diff", "--stat", "main~3", "main", "src/"); got != "added  src/new.txt\n1 path changed: 1 added\n" {
		t.Errorf("diff --stat main~3 main src/:\n%s", got)
	}
	if got := mustRun(t, "diff", "main~3", "main", "--", "README", "link"); strings.Contains(got, "src/new.txt") || !strings.Contains(got, "+++ b/README") {
		t.Errorf("diff -- README link:\n%s", got)
	}
	if got := mustRun(t, "diff", "--stat", "main~3", "main", "."); got != mustRun(t, "diff", "--stat", "main~3", "main") {
		t.Errorf("diff . is not the whole diff:\n%s", got)
	}
	if code, _, _ := runCLI(t, "diff", "main~3", "main", "../x"); code != exitUsage {
		t.Errorf("diff with a bad path: exit %d", code)
	}
	if got := mustRun(t, "blame", "main:README"); got != "original      1) hi\noperation:w1  2) there\n" {
		t.Errorf("blame:\n%s", got)
	}
	var b struct {
		Path   string `json:"path"`
		Ranges []struct {
			Start, End int
			Owner      string
		} `json:"ranges"`
	}
	mustJSON(t, mustRun(t, "blame", "--json", "main:README"), &b)
	if b.Path != "README" || len(b.Ranges) != 2 || b.Ranges[1].Owner != "operation:w1" || b.Ranges[1].Start != 2 {
		t.Errorf("blame --json: %+v", b)
	}
	var r resetJSON
	mustJSON(t, mustRun(t, "reset", "--json", "main", "main~3"), &r)
	if r.Branch != "main" || r.Previous != plain[0].Commit || r.Head != plain[3].Commit {
		t.Errorf("reset --json: %+v", r)
	}
	if got := mustRun(t, "fs", "read", "README"); got != "hi\n" {
		t.Errorf("after reset: %q", got)
	}
	if got := mustRun(t, "reset", "main", plain[0].Commit[:10]); !strings.HasPrefix(got, "main is at "+plain[0].Commit[:12]) {
		t.Errorf("reset back: %q", got)
	}
	if got := mustRun(t, "fs", "read", "README"); got != "hi\nthere\n" {
		t.Errorf("after reset back: %q", got)
	}
}

func TestFSHelp(t *testing.T) {
	for name, v := range fsVerbs {
		out := mustRun(t, "fs", name, "--help")
		if !strings.Contains(out, "Usage: layerfs fs "+name+" ") || !strings.Contains(out, "-store") || !strings.Contains(out, v.summary) {
			t.Errorf("fs %s --help: %q", name, out)
		}
	}
	for _, name := range []string{"write", "edit", "rm", "mv", "mkdir"} {
		out := mustRun(t, "fs", name, "--help")
		for _, flag := range []string{"-base COMMIT", "-id ID", "-message MESSAGE", "-json"} {
			if !strings.Contains(out, flag) {
				t.Errorf("fs %s --help lacks %s", name, flag)
			}
		}
	}
	out := mustRun(t, "fs", "--help")
	for name := range fsVerbs {
		if !strings.Contains(out, "  "+name+" ") {
			t.Errorf("fs --help does not list %s", name)
		}
	}
	for _, name := range []string{"log", "diff", "blame", "reset"} {
		if out := mustRun(t, name, "--help"); !strings.Contains(out, "-json") {
			t.Errorf("%s --help lacks --json: %q", name, out)
		}
	}
}

// TestFSJSONNamesNotUTF8: JSON shows a name whose bytes are not UTF-8 with
// U+FFFD; path_base64 (and target_base64) hold its bytes, so a script can
// name the file back.
func TestFSJSONNamesNotUTF8(t *testing.T) {
	newCLIStore(t)
	name := "caf\xe9.txt" // Latin-1
	if code, _, errs := runWithStdin(t, "x\n", "fs", "write", "main:"+name); code != exitOK {
		t.Fatalf("write: exit %d %s", code, errs)
	}
	var list []fileJSON
	mustJSON(t, mustRun(t, "fs", "ls", "--json"), &list)
	found := false
	for _, fi := range list {
		if fi.PathBase64 == "" {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(fi.PathBase64)
		if err != nil || string(b) != name {
			t.Fatalf("path_base64 %q: %q %v", fi.PathBase64, b, err)
		}
		found = true
		if got := mustRun(t, "fs", "read", "main:"+string(b)); got != "x\n" {
			t.Errorf("read it back: %q", got)
		}
	}
	if !found {
		t.Fatalf("no path_base64 in %+v", list)
	}
	var st fileJSON
	mustJSON(t, mustRun(t, "fs", "stat", "--json", "main:README"), &st)
	if st.PathBase64 != "" {
		t.Errorf("path_base64 for a UTF-8 name: %+v", st)
	}
}
