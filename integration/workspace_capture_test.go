package integration

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/publish"
	"github.com/layerfs/layerfs/sessions"
	"github.com/layerfs/layerfs/store"
)

// captureBase is the tree every capture case starts from. Every path in
// it, directories and symlinks included, has the mtime captureTime.
var captureBase = map[string]string{
	"a.txt":           "alpha\n",
	"b.txt":           "bravo\n",
	"exec.sh":         "#!/bin/sh\necho exec\n",
	"link":            "->a.txt",
	"dangling":        "->nowhere",
	"d/f":             "f\n",
	"d/g":             "g\n",
	"d/sub/h":         "h\n",
	"d/sub/deep/i":    "i\n",
	"e/":              "",
	"tree/x/y/z":      "z\n",
	"tree/x/w":        "w\n",
	"tree/v":          "v\n",
	"swap1/one":       "one\n",
	"swap2/two":       "two\n",
	"file2dir":        "a file, then a directory\n",
	"dir2file/inner":  "inner\n",
	"dir2file/sub/in": "in\n",
}

var captureTime = time.Date(2020, 1, 2, 3, 4, 5, 123456789, time.UTC)

// captureCases run the same shell commands in a Workspace and in an ext4
// copy of captureBase; the committed head must match the copy.
var captureCases = []struct {
	name, script string
	status       string // default committed
}{
	{name: "create", script: "echo new > new.txt"},
	{name: "create nested and empty dirs", script: "mkdir -p n1/n2 && echo deep > n1/n2/f && mkdir empty && printf x > d/added && echo z > tree/x/y/z2"},
	{name: "create executable", script: "printf '#!/bin/sh\\n' > run.sh && chmod 755 run.sh"},
	{name: "overwrite", script: "echo changed > a.txt && echo CHANGED > d/sub/h"},
	{name: "overwrite bytes in a big file", script: "printf XXXXXXXXXX | dd of=big.bin bs=1 seek=150000 conv=notrunc 2>/dev/null"},
	{name: "append", script: "echo more >> a.txt && echo more >> d/sub/deep/i && head -c 100000 big.bin >> big.bin"},
	{name: "truncate shorter", script: "truncate -s 2 a.txt && truncate -s 1000 big.bin"},
	{name: "truncate to zero", script: ": > b.txt"},
	{name: "truncate longer", script: "truncate -s 200000 b.txt"},
	{name: "delete file", script: "rm a.txt d/g link"},
	{name: "delete dir tree", script: "rm -rf tree d/sub"},
	{name: "delete empty dir", script: "rmdir e"},
	{name: "delete and recreate dir", script: "rm -rf d && mkdir d && echo fresh > d/f && mkdir d/sub"},
	{name: "delete and recreate file", script: "rm a.txt && echo alpha > a.txt"},
	{name: "rename file", script: "mv a.txt a2.txt && mv b.txt d/sub/b.txt"},
	{name: "rename file over another", script: "mv a.txt b.txt"},
	{name: "rename lower dir", script: "mv d d2"},
	{name: "rename lower dir elsewhere", script: "mkdir -p m && mv d/sub m/moved"},
	{name: "rename lower dir and edit inside", script: "mv d d2 && echo y >> d2/f && rm d2/g && echo new > d2/sub/new && mv d2/sub/deep d2/deep2"},
	{name: "rename lower dir twice", script: "mv d d2 && mv d2 tree/d3"},
	{name: "rename inside a renamed dir", script: "mv d/sub d/sub2 && mv d z"},
	{name: "swap two lower dirs", script: "mv swap1 tmp && mv swap2 swap1 && mv tmp swap2"},
	{name: "rename dir and reuse its name", script: "mv d d2 && mkdir d && echo new > d/f"},
	{name: "rename dir over empty dir", script: "mv d e"},
	{name: "rename new dir", script: "mkdir -p n/m && echo x > n/m/f && mv n n2"},
	{name: "chmod only", script: "chmod 600 a.txt && chmod 755 b.txt && chmod 700 d && chmod 555 d/sub/deep"},
	{name: "symlink create", script: "ln -s a.txt newlink && ln -s d/sub d/dirlink && ln -s /abs/target abs"},
	{name: "symlink retarget", script: "ln -sfn b.txt link && ln -sfn somewhere dangling"},
	{name: "symlink replaced by file", script: "rm link && echo x > link"},
	{name: "touch only", script: "touch a.txt && touch -d '2022-03-04 05:06:07.5' b.txt d/sub && touch -h -d '2021-01-01 00:00:00' link"},
	{name: "copy-up without change", status: api.StatusUpToDate,
		script: ": <> a.txt && chmod 644 b.txt && : <> d/sub/deep/i && chown 0:0 exec.sh && cat big.bin > /dev/null && touch -d '2020-01-02 03:04:05.123456789' tree/v"},
	{name: "hard link", script: "ln a.txt hard.txt && ln d/f d/sub/f2 && echo n > n.txt && ln n.txt n2.txt"},
	{name: "hard link then write", script: "ln a.txt hard.txt && echo w >> hard.txt"},
	{name: "file replaced by dir", script: "rm file2dir && mkdir file2dir && echo x > file2dir/in"},
	{name: "dir replaced by file", script: "rm -rf dir2file && echo now a file > dir2file"},
	{name: "dir replaced by symlink", script: "rm -rf tree && ln -s d tree"},
	{name: "rename copied-up dir", script: "echo x > d/new && rm d/g && mv d d2"},
	{name: "rename dir then delete it", script: "mv d d2 && rm -rf d2"},
	{name: "rename dir into a new deep dir", script: "mkdir -p a/b/c && mv d a/b/c/d && mv tree a/b/t"},
	{name: "rename dir into a renamed dir", script: "mv tree t2 && mv d t2/d"},
	{name: "rename dir into a dir that replaced a file", script: "rm file2dir && mkdir file2dir && mv d file2dir/d"},
	{name: "move a file out and delete its dir", script: "mv d/f f2 && mv d/sub/h h2 && rm -rf d"},
	{name: "rename file away and back", status: api.StatusUpToDate, script: "mv a.txt x && mv x a.txt"},
	{name: "rename dir away and back", status: api.StatusUpToDate, script: "mv d d2 && mv d2 d"},
	{name: "rewrite same content", script: "printf 'alpha\\n' > a.txt"},
	{name: "names with spaces and unicode", script: "echo x > 'sp ace.txt' && mkdir 'dír ü' && echo y > 'dír ü/f' && mv d 'd renamed' && mv swap1 'swap ✓'"},
	{name: "long names", script: "n=$(printf 'n%.0s' $(seq 255)) && echo x > $n && mkdir -p e/$n && mv tree e/$n/tree"},
	{name: "special modes and owners", script: "chmod 4755 exec.sh && chmod 1777 e && chmod 2750 d && chown 1000:1000 a.txt && chown -h 7:7 link"},
	{name: "empty and large new files", script: ": > empty && yes abcdefgh | head -c 2000000 > big2 && cp big.bin big3"},
	{name: "everything at once", script: "echo 1 > a.txt && rm b.txt && mv d d2 && rm -rf tree && mkdir tree && echo t > tree/t && ln -sfn d2 link && chmod 700 e && touch -d '2023-01-01' exec.sh"},
}

// TestWorkspaceCaptureTable runs each case's commands in a Workspace of a
// branch forked from the base, commits, and compares the branch head
// three ways: with diff -r and find against an ext4 copy that ran the same
// commands (mtimes compared as unchanged, set to a given time, or set to
// now); with find against the Workspace's view before the commit, mtimes
// to the nanosecond; and the view after the commit (the new head through
// FUSE) against the view before it.
//
// It runs on both kinds of upperdir: on a filesystem that clones (the
// daemon's XFS volume, with metacopy: a chmod or a rename copies up
// metadata only) and on the state directory's ext4 (volume off).
func TestWorkspaceCaptureTable(t *testing.T) {
	t.Run("xfs", func(t *testing.T) { needVolume(t); captureTable(t, sessions.Config{}) })
	t.Run("ext4", func(t *testing.T) { captureTable(t, sessions.Config{Volume: sessions.VolumeOff}) })
}

func captureTable(t *testing.T, cfg sessions.Config) {
	src := filepath.Join(t.TempDir(), "base")
	writeTree(t, src, captureBase)
	if err := os.WriteFile(filepath.Join(src, "big.bin"), randomBytes(5, 300<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(src, "exec.sh"), 0o755)
	setTimes(t, src, captureTime)
	d := startDaemonFrom(t, src, cfg)
	base := findTree(t, src)
	for i, c := range captureCases {
		t.Run(c.name, func(t *testing.T) {
			branch := fmt.Sprintf("case-%d", i)
			if _, err := d.st.Fork(branch, "main"); err != nil {
				t.Fatal(err)
			}
			want := filepath.Join(t.TempDir(), "ext4")
			if out, err := exec.Command("cp", "-a", src, want).CombinedOutput(); err != nil {
				t.Fatalf("cp -a: %v %s", err, out)
			}
			run(t, want, nil, "sh", "-ec", c.script)

			w := d.create(t, branch)
			d.sh(t, w.ID, "set -e; "+c.script)
			view := findTree(t, w.HostPath)
			status := c.status
			if status == "" {
				status = api.StatusCommitted
			}
			d.commit(t, w.ID, status)
			after := findTree(t, w.HostPath)
			head := exportRef(t, d.st, branch)

			diffR(t, want, head)
			if diff := diffTrees(findTree(t, want), findTree(t, head), mtimeClass(base)); diff != "" {
				t.Errorf("head differs from the ext4 copy:\n%s", diff)
			}
			if diff := diffTrees(view, findTree(t, head), nil); diff != "" {
				t.Errorf("head differs from the Workspace before the commit:\n%s", diff)
			}
			if diff := diffTrees(view, after, nil); diff != "" {
				t.Errorf("the Workspace after the commit differs from before:\n%s", diff)
			}
			if err := d.End(w.ID, false); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// mtimeClass makes mtimes comparable between two trees that ran the same
// commands at different moments: an mtime the base had stays as it is
// when the path existed in the base, one set to a given time (years back)
// stays, and one set to "now" becomes "recent".
func mtimeClass(base map[string]findEntry) func(string, findEntry) findEntry {
	baseTime := base["a.txt"].MTime
	recent := float64(time.Now().Add(-time.Hour).Unix())
	return func(p string, e findEntry) findEntry {
		var secs float64
		fmt.Sscanf(e.MTime, "%f", &secs)
		switch {
		case e.MTime == baseTime:
			e.MTime = "base"
		case secs > recent:
			e.MTime = "recent"
		}
		return e
	}
}

// captureSteps run one after the other in one Workspace, each committed
// before the next: every step's lower layer is the Commit the previous
// step made, renamed directories and opaque ones included.
var captureSteps = []string{
	"mv d d2 && echo one >> d2/f",
	"mv d2 d && rm -rf d/sub/deep && ln -s ../a.txt d/link",
	"rm -rf d && mkdir d && echo fresh > d/f && mv tree d/tree",
	"mv d/tree tree && mkdir -p tree/x/y && echo z2 > tree/x/y/z",
	"rm file2dir && mkdir file2dir && mv swap1 file2dir/s && ln b.txt file2dir/hard",
	"rm -rf file2dir && echo file again > file2dir && chmod 600 file2dir",
	"truncate -s 0 big.bin && echo tiny >> big.bin && touch -d '2001-02-03' big.bin",
	": <> a.txt && chmod 644 b.txt",
	"mv e e2 && mkdir e && touch e/x && rmdir e2",
}

// TestWorkspaceCaptureSequence runs captureSteps in one Workspace and in
// one ext4 copy, committing after each step, and compares the head with
// the copy each time.
func TestWorkspaceCaptureSequence(t *testing.T) {
	src := filepath.Join(t.TempDir(), "base")
	writeTree(t, src, captureBase)
	if err := os.WriteFile(filepath.Join(src, "big.bin"), randomBytes(5, 300<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	setTimes(t, src, captureTime)
	d := startDaemonFrom(t, src, sessions.Config{})
	base := findTree(t, src)
	want := filepath.Join(t.TempDir(), "ext4")
	if out, err := exec.Command("cp", "-a", src, want).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v %s", err, out)
	}
	w := d.create(t, "main")
	for i, script := range captureSteps {
		run(t, want, nil, "sh", "-ec", script)
		d.sh(t, w.ID, "set -e; "+script)
		view := findTree(t, w.HostPath)
		res, err := d.Commit(w.ID, api.CommitRequest{})
		if err != nil || res.Status == api.StatusConflict {
			t.Fatalf("step %d (%s): %v %+v", i, script, err, res)
		}
		head := exportRef(t, d.st, "main")
		diffR(t, want, head)
		if diff := diffTrees(findTree(t, want), findTree(t, head), mtimeClass(base)); diff != "" {
			t.Errorf("step %d (%s): head differs from the ext4 copy:\n%s", i, script, diff)
		}
		if diff := diffTrees(view, findTree(t, w.HostPath), nil); diff != "" {
			t.Errorf("step %d (%s): the Workspace after the commit differs from before:\n%s", i, script, diff)
		}
		if t.Failed() {
			t.FailNow()
		}
	}
}

// TestWorkspaceCommitKeepsUncommitted: what a commit leaves out of the
// Store — paths /.layerfsignore matches, a FIFO — stays in the Workspace
// as it follows the head, and the result lists it under kept:
//   - new files and directories;
//   - an ignored lower file chmodded (a metacopy, its data from the old
//     lower layer), which keeps its content though the head's differs;
//   - a lower directory renamed to an ignored name (a redirect from a path
//     the Commit removes), then made anew: the renamed one must not show
//     the new one's files.
//
// Nothing of it is pending afterwards. An ignored file whose directory
// another Workspace removed cannot stay, and is listed under dropped. A
// conflict keeps it all.
func TestWorkspaceCommitKeepsUncommitted(t *testing.T) {
	d := startDaemon(t, map[string]string{
		".layerfsignore": "scratch/\n*.o\nbuild/\n", "a.txt": "a\n", "old.o": "old object\n",
		"lib/a.go": "package lib\n", "lib/sub/b.go": "package sub\n", "sub/keep.txt": "k\n",
	}, sessions.Config{})
	w := d.create(t, "main")
	d.sh(t, w.ID, "mkdir scratch && echo kept > scratch/x && echo b > a.txt && echo obj > main.o && mkfifo pipe && "+
		"mkdir -p new/deep && echo n > new/n.txt && echo y > new/deep/y.o && chmod 600 old.o && mv lib build && mkdir lib && echo new > lib/n.go")
	check := func(step string, res api.CommitResult) {
		t.Helper()
		want := []api.UncommittedPath{{Path: "build", Why: api.UncommittedIgnored}, {Path: "main.o", Why: api.UncommittedIgnored},
			{Path: "new/deep/y.o", Why: api.UncommittedIgnored}, {Path: "old.o", Why: api.UncommittedIgnored},
			{Path: "pipe", Why: api.UncommittedSpecial}, {Path: "scratch", Why: api.UncommittedIgnored}}
		if !slices.Equal(res.Kept, want) || len(res.Dropped) != 0 {
			t.Fatalf("%s: kept %v, dropped %v; want kept %v", step, res.Kept, res.Dropped, want)
		}
		if out := d.sh(t, w.ID, "cat scratch/x build/a.go build/sub/b.go new/deep/y.o main.o old.o lib/n.go && stat -c %a old.o && test -p pipe && ls build build/sub | tr '\\n' ' '"); out != "kept\npackage lib\npackage sub\ny\nobj\nold object\nnew\n600\nbuild: a.go sub  build/sub: b.go " {
			t.Fatalf("%s: the Workspace reads %q", step, out)
		}
		if ws, err := d.Inspect(w.ID); err != nil || len(ws.Pending) != 0 {
			t.Fatalf("%s: pending %v, %v", step, ws.Pending, err)
		}
	}
	// A file call rewrites old.o on the branch: the Workspace's chmodded
	// copy must keep its own content, not take the head's.
	f, err := d.st.FS("main")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write("old.o", []byte("head's object\n")); err != nil {
		t.Fatal(err)
	}
	check("commit", d.commit(t, w.ID, api.StatusCommitted))
	if got := d.read(t, "main", "a.txt"); got != "b\n" {
		t.Fatalf("a.txt on main: %q", got)
	}
	if got := d.read(t, "main", "old.o"); got != "head's object\n" {
		t.Fatalf("old.o on main: %q", got)
	}
	head := exportRef(t, d.st, "main")
	for _, p := range []string{"lib/a.go", "build", "scratch", "main.o", "pipe", "new/deep/y.o"} {
		if _, err := os.Lstat(filepath.Join(head, p)); err == nil {
			t.Errorf("main holds %s", p)
		}
	}
	// But for what it kept, the Workspace shows the head: the directories
	// made to hold kept entries are the head's, times and all.
	want, got := findTree(t, head), findTree(t, w.HostPath)
	delete(want, "old.o") // the Workspace's own
	for p := range got {
		if p == "old.o" || p == "main.o" || p == "pipe" || p == "new/deep/y.o" || strings.HasPrefix(p, "build") || strings.HasPrefix(p, "scratch") {
			delete(got, p)
		}
	}
	if diff := diffTrees(want, got, nil); diff != "" {
		t.Errorf("the Workspace differs from the head:\n%s", diff)
	}
	check("up to date", d.commit(t, w.ID, api.StatusUpToDate))

	// An ignored file in a directory that another Workspace removes
	// meanwhile: nowhere to keep it. Making it changed the directory's
	// mtime, which does not bring the directory back.
	d.sh(t, w.ID, "echo z > sub/z.o")
	other := d.create(t, "main")
	d.sh(t, other.ID, "rm -r sub")
	d.commit(t, other.ID, api.StatusCommitted)
	d.sh(t, w.ID, "echo c > a.txt")
	res := d.commit(t, w.ID, api.StatusCommitted)
	if want := []api.UncommittedPath{{Path: "sub/z.o", Why: api.UncommittedIgnored}}; !slices.Equal(res.Dropped, want) {
		t.Fatalf("dropped %v, want %v", res.Dropped, want)
	}
	if out := d.sh(t, w.ID, "test ! -e sub && cat scratch/x"); out != "kept\n" {
		t.Fatalf("after the drop: %q", out)
	}

	// A conflict: the Workspace keeps its upperdir, ignored files and all.
	other = d.create(t, "main")
	d.sh(t, other.ID, "printf 'other\\n' > a.txt")
	d.sh(t, w.ID, "printf 'mine\\n' > a.txt && echo obj > x.o")
	d.commit(t, other.ID, api.StatusCommitted)
	res = d.commit(t, w.ID, api.StatusConflict)
	if !slices.ContainsFunc(res.Kept, func(u api.UncommittedPath) bool { return u.Path == "x.o" }) || len(res.Dropped) != 0 {
		t.Fatalf("conflict: kept %v, dropped %v", res.Kept, res.Dropped)
	}
	if out := d.sh(t, w.ID, "cat x.o scratch/x"); out != "obj\nkept\n" {
		t.Fatalf("after the conflict: %q", out)
	}
}

// A discard drops every change but keeps what a commit would leave out:
// ignored paths (a chmodded lower file and a renamed directory among
// them) and special files, unless told to drop them too.
func TestWorkspaceDiscardKeepsUncommitted(t *testing.T) {
	d := startDaemon(t, map[string]string{
		".layerfsignore": "scratch/\n*.o\nbuild/\n", "a.txt": "a\n", "old.o": "old object\n",
		"lib/a.go": "package lib\n", "lib/sub/b.go": "package sub\n", "doc/readme.md": "# doc\n",
	}, sessions.Config{})
	w := d.create(t, "main")
	head := exportRef(t, d.st, "main")
	d.sh(t, w.ID, "mkdir scratch && echo kept > scratch/x && echo b > a.txt && echo obj > main.o && mkfifo pipe && "+
		"mkdir new && echo y > new/y.o && echo n > new.txt && chmod 600 old.o && mv lib build && chmod 700 doc && echo o > doc/x.o")
	res, err := d.Discard(w.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	wantKept := []api.UncommittedPath{{Path: "build", Why: api.UncommittedIgnored}, {Path: "doc/x.o", Why: api.UncommittedIgnored},
		{Path: "main.o", Why: api.UncommittedIgnored}, {Path: "old.o", Why: api.UncommittedIgnored},
		{Path: "pipe", Why: api.UncommittedSpecial}, {Path: "scratch", Why: api.UncommittedIgnored}}
	wantDropped := []api.UncommittedPath{{Path: "new/y.o", Why: api.UncommittedIgnored}} // its directory was a change
	if !slices.Equal(res.Kept, wantKept) || !slices.Equal(res.Dropped, wantDropped) {
		t.Fatalf("kept %v, dropped %v; want %v, %v", res.Kept, res.Dropped, wantKept, wantDropped)
	}
	if res.Workspace.ID != w.ID {
		t.Fatalf("the result describes %q", res.Workspace.ID)
	}
	// doc holds a kept file, and takes back the Commit's mode and times
	// (Pending, below, would list it otherwise).
	if out := d.sh(t, w.ID, "cat a.txt scratch/x main.o old.o build/a.go build/sub/b.go lib/a.go doc/x.o && stat -c %a old.o doc && test -p pipe && test ! -e new && test ! -e new.txt && echo ok"); out != "a\nkept\nobj\nold object\npackage lib\npackage sub\npackage lib\no\n600\n755\nok\n" {
		t.Fatalf("after the discard the Workspace reads %q", out)
	}
	if ws, err := d.Inspect(w.ID); err != nil || len(ws.Pending) != 0 {
		t.Fatalf("pending %v, %v", ws.Pending, err)
	}
	// The kept entries survive a commit of a change made after.
	d.sh(t, w.ID, "echo c > a.txt")
	d.commit(t, w.ID, api.StatusCommitted)
	if out := d.sh(t, w.ID, "cat scratch/x build/sub/b.go && test -p pipe && echo ok"); out != "kept\npackage sub\nok\n" {
		t.Fatalf("after a commit: %q", out)
	}

	// all drops them too: the Workspace is the head, exactly.
	res, err = d.Discard(w.ID, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Kept) != 0 || len(res.Dropped) != 0 {
		t.Fatalf("discard all: kept %v, dropped %v", res.Kept, res.Dropped)
	}
	head = exportRef(t, d.st, "main")
	if diff := diffTrees(findTree(t, head), findTree(t, w.HostPath), nil); diff != "" {
		t.Fatalf("after discarding all, the Workspace differs from the head:\n%s", diff)
	}
}

// A conflict moves the Workspace onto the head it met, upperdir and all
// (rebase). An ignored directory renamed from one the head has since
// changed, and a chmodded ignored file the head has since rewritten,
// keep what the Workspace had: their content is copied up first.
func TestWorkspaceConflictKeepsIgnoredRenames(t *testing.T) {
	d := startDaemon(t, map[string]string{
		".layerfsignore": "build/\n*.o\n", "a.txt": "a\n", "lib/a.go": "package lib\n", "lib/sub/b.go": "package sub\n", "old.o": "old\n",
	}, sessions.Config{})
	w, other := d.create(t, "main"), d.create(t, "main")
	d.sh(t, w.ID, "mv lib build && echo mine > a.txt && chmod 600 old.o")
	d.sh(t, other.ID, "rm -r lib/sub && echo new > lib/new.go && echo other > a.txt && echo new > old.o")
	d.commit(t, other.ID, api.StatusCommitted)
	res := d.commit(t, w.ID, api.StatusConflict)
	if !slices.Contains(res.Paths, "a.txt") {
		t.Fatalf("conflict on %v, want a.txt", res.Paths)
	}
	if out := d.sh(t, w.ID, "cat build/a.go build/sub/b.go old.o && stat -c %a old.o && ls build build/sub | tr '\\n' ' '"); out != "package lib\npackage sub\nold\n600\nbuild: a.go sub  build/sub: b.go " {
		t.Fatalf("after the conflict the Workspace reads %q", out)
	}
}

// A directory renamed in a Workspace from one another Workspace then
// removed: after a conflict on another file the Workspace keeps it whole
// (a file in it copied up without a change too), and its next commit
// lands it.
func TestWorkspaceConflictKeepsOrphanedRename(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n", "src/a.go": "package src\n", "src/sub/b.go": "package sub\n"}, sessions.Config{})
	w, other := d.create(t, "main"), d.create(t, "main")
	d.sh(t, w.ID, "mv src dst && : >> dst/a.go && echo mine > a.txt")
	d.sh(t, other.ID, "rm -r src && echo other > a.txt")
	d.commit(t, other.ID, api.StatusCommitted)
	if res := d.commit(t, w.ID, api.StatusConflict); !slices.Equal(res.Paths, []string{"a.txt"}) {
		t.Fatalf("conflict on %v, want [a.txt]", res.Paths)
	}
	if out := d.sh(t, w.ID, "cat dst/a.go dst/sub/b.go && test ! -e src && echo ok"); out != "package src\npackage sub\nok\n" {
		t.Fatalf("after the conflict the Workspace reads %q", out)
	}
	d.sh(t, w.ID, "echo settled > a.txt")
	d.commit(t, w.ID, api.StatusCommitted)
	if got := d.read(t, "main", "dst/sub/b.go") + d.read(t, "main", "dst/a.go"); got != "package sub\npackage src\n" {
		t.Fatalf("main holds %q", got)
	}
}

// CaptureUncommitted, which a discard asks, answers for an upperdir
// whose renamed directory lost its source, where a capture fails.
func TestCaptureUncommittedOrphanedRedirect(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{})
	upper := t.TempDir()
	writeTree(t, upper, map[string]string{"dst/x.o": "obj\n", "dst/y.go": "package y\n"})
	if err := unix.Lsetxattr(filepath.Join(upper, "dst"), "trusted.overlay.redirect", []byte("/gone"), 0); err != nil {
		t.Fatalf("set the redirect xattr: %v", err)
	}
	s := d.st.Backend()
	b, err := s.Branch("main")
	if err != nil {
		t.Fatal(err)
	}
	u := publish.Upper{Dir: upper, Base: b.Head, Ignore: publish.ParseRules("*.o\n")}
	if _, err := publish.CaptureUpperDry(s, u); err == nil {
		t.Fatal("a capture of a redirect to nothing succeeded")
	}
	c, err := publish.CaptureUncommitted(s, u)
	if err != nil || !slices.Equal(c.Ignored, []string{"dst/x.o"}) {
		t.Fatalf("CaptureUncommitted: ignored %v, %v; want [dst/x.o]", c.Ignored, err)
	}
}

// A Workspace is captured by the /.layerfsignore it sees, as git reads
// .gitignore from the work tree: node_modules added with the rule that
// ignores it stays out of the commit, and comes in once the rule goes; a
// head whose rules changed meanwhile does not count until the Workspace
// follows it. The rule file is never read through a symlink.
func TestWorkspaceOwnIgnoreRules(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{})
	w := d.create(t, "main")
	d.sh(t, w.ID, "printf 'node_modules/\\n%%include extra.ignore\\n' > .layerfsignore && printf '*.log\\n' > extra.ignore && "+
		"mkdir -p node_modules/x && echo m > node_modules/x/i.js && echo l > run.log && echo b > a.txt")
	pending := func(want ...string) {
		t.Helper()
		in, err := d.Inspect(w.ID)
		if err != nil || !slices.Equal(in.Pending, want) {
			t.Fatalf("pending %v, %v; want %v", in.Pending, err, want)
		}
	}
	pending(".layerfsignore", "a.txt", "extra.ignore")
	res := d.commit(t, w.ID, api.StatusCommitted)
	if want := []api.UncommittedPath{{Path: "node_modules", Why: api.UncommittedIgnored}, {Path: "run.log", Why: api.UncommittedIgnored}}; !slices.Equal(res.Kept, want) {
		t.Fatalf("kept %v, want %v", res.Kept, want)
	}
	head := exportRef(t, d.st, "main")
	for p, want := range map[string]bool{"a.txt": true, ".layerfsignore": true, "extra.ignore": true, "node_modules": false, "run.log": false} {
		if _, err := os.Lstat(filepath.Join(head, p)); (err == nil) != want {
			t.Errorf("main holds %s: %v, want %v", p, err == nil, want)
		}
	}
	// A symlink in its place is not followed: no rules, so the log counts.
	d.sh(t, w.ID, "rm .layerfsignore && ln -s extra.ignore .layerfsignore")
	pending(".layerfsignore", "node_modules", "node_modules/x", "node_modules/x/i.js", "run.log")
	d.sh(t, w.ID, "rm .layerfsignore && printf 'node_modules/\\n' > .layerfsignore")
	pending(".layerfsignore", "run.log")
	d.commit(t, w.ID, api.StatusCommitted)
	if got := d.read(t, "main", "run.log"); got != "l\n" {
		t.Fatalf("run.log on main: %q", got)
	}

	// Rules that change on the head apply once the Workspace follows it:
	// until then it goes by the file it shows.
	other := d.create(t, "main")
	d.sh(t, other.ID, "printf '*.tmp\\n' > .layerfsignore")
	d.commit(t, other.ID, api.StatusCommitted)
	d.sh(t, w.ID, "echo t > x.tmp && echo k > node_modules/x/k.js")
	pending("x.tmp")
}

// A conflict moves the Workspace onto the head with its upperdir; a
// directory the head removed, where the Workspace only made an ignored
// file (which touched the directory's mtime), goes with it, and the file
// is listed as dropped: the next commit does not bring the directory
// back.
func TestWorkspaceConflictDropsRemovedDirs(t *testing.T) {
	d := startDaemon(t, map[string]string{".layerfsignore": "*.o\n", "a.txt": "a\n", "dir/sub/x.txt": "x\n", "keep/y.txt": "y\n"}, sessions.Config{})
	w, other := d.create(t, "main"), d.create(t, "main")
	d.sh(t, w.ID, "echo o > dir/sub/z.o && echo o > keep/k.o && echo mine > a.txt")
	d.sh(t, other.ID, "rm -r dir && echo other > a.txt")
	d.commit(t, other.ID, api.StatusCommitted)
	res := d.commit(t, w.ID, api.StatusConflict)
	if want := []api.UncommittedPath{{Path: "dir/sub/z.o", Why: api.UncommittedIgnored}}; !slices.Equal(res.Dropped, want) {
		t.Fatalf("dropped %v, want %v", res.Dropped, want)
	}
	if want := []api.UncommittedPath{{Path: "keep/k.o", Why: api.UncommittedIgnored}}; !slices.Equal(res.Kept, want) {
		t.Fatalf("kept %v, want %v", res.Kept, want)
	}
	if out := d.sh(t, w.ID, "test ! -e dir && cat keep/k.o"); out != "o\n" {
		t.Fatalf("after the conflict: %q", out)
	}
	if in, err := d.Inspect(w.ID); err != nil || !slices.Equal(in.Pending, []string{"a.txt", "keep"}) {
		t.Fatalf("pending %v, %v; want [a.txt keep]", in.Pending, err)
	}
	d.sh(t, w.ID, "echo settled > a.txt")
	d.commit(t, w.ID, api.StatusCommitted)
	if _, err := os.Lstat(filepath.Join(exportRef(t, d.st, "main"), "dir")); err == nil {
		t.Fatal("main holds dir again")
	}
}

// A FIFO or socket in place of a lower file or directory: the commit
// removes what it replaced, as on any filesystem, and keeps the special
// file in the Workspace; nothing is pending after. A discard drops such
// a replacement like any other change: the lower entry shows again.
func TestWorkspaceSpecialReplacesLower(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n", "d/x": "x\n", "e/y": "y\n"}, sessions.Config{})
	w := d.create(t, "main")
	d.sh(t, w.ID, "rm a.txt && mkfifo a.txt && rm -r d && mkfifo d && "+
		`rm b.txt && { python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind("b.txt")' 2>/dev/null || mkfifo b.txt; } && test -S b.txt`)
	res := d.commit(t, w.ID, api.StatusCommitted)
	want := []api.UncommittedPath{{Path: "a.txt", Why: api.UncommittedSpecial}, {Path: "b.txt", Why: api.UncommittedSpecial}, {Path: "d", Why: api.UncommittedSpecial}}
	if !slices.Equal(res.Kept, want) {
		t.Fatalf("kept %v, want %v", res.Kept, want)
	}
	head := exportRef(t, d.st, "main")
	for _, p := range []string{"a.txt", "b.txt", "d"} {
		if _, err := os.Lstat(filepath.Join(head, p)); err == nil {
			t.Errorf("main still holds %s", p)
		}
	}
	if out := d.sh(t, w.ID, "test -p a.txt && test -p d && test -S b.txt && cat e/y"); out != "y\n" {
		t.Fatalf("after the commit the Workspace reads %q", out)
	}
	if ws, err := d.Inspect(w.ID); err != nil || len(ws.Pending) != 0 {
		t.Fatalf("pending %v, %v", ws.Pending, err)
	}

	d.sh(t, w.ID, "rm -r e && mkfifo e && mkfifo new")
	if ws, err := d.Inspect(w.ID); err != nil || !slices.Equal(ws.Pending, []string{"e"}) {
		t.Fatalf("pending %v, %v; want [e]", ws.Pending, err)
	}
	dres, err := d.Discard(w.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := []api.UncommittedPath{{Path: "a.txt", Why: api.UncommittedSpecial}, {Path: "b.txt", Why: api.UncommittedSpecial},
		{Path: "d", Why: api.UncommittedSpecial}, {Path: "new", Why: api.UncommittedSpecial}}; !slices.Equal(dres.Kept, want) {
		t.Fatalf("discard kept %v, want %v", dres.Kept, want)
	}
	if out := d.sh(t, w.ID, "cat e/y && test -p new && echo ok"); out != "y\nok\n" {
		t.Fatalf("after the discard the Workspace reads %q", out)
	}
	if ws, err := d.Inspect(w.ID); err != nil || len(ws.Pending) != 0 {
		t.Fatalf("after the discard: pending %v, %v", ws.Pending, err)
	}
}

// A path of up to 4095 bytes (Linux's PATH_MAX less one) is a path a
// Workspace can commit, though the upperdir's own path in front of it
// makes the whole longer than PATH_MAX; a longer one is refused as a bad
// path, naming it, and nothing lands.
func TestWorkspaceCommitLongPaths(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{})
	w := d.create(t, "main")
	name := strings.Repeat("n", 200)
	dir := "long" + strings.Repeat("/"+name, 20) // 4 + 20*201 = 4024 bytes
	file := dir + "/" + strings.Repeat("f", 4095-len(dir)-1)
	d.sh(t, w.ID, fmt.Sprintf("mkdir -p %s && cd %s && echo deep > %s && ln -s %s link", dir, dir, path.Base(file), path.Base(file)))
	d.commit(t, w.ID, api.StatusCommitted)
	if got := d.read(t, "main", file); got != "deep\n" {
		t.Fatalf("main:%.20s... reads %q", file, got)
	}
	if got := d.read(t, "main", dir+"/link"); got != path.Base(file) {
		t.Fatalf("the link reads %.20q...", got)
	}
	head := d.head(t)

	d.sh(t, w.ID, fmt.Sprintf("cd %s && mkdir %s && echo x > %s/x", dir, name, name))
	_, err := d.Commit(w.ID, api.CommitRequest{})
	if !errors.Is(err, store.ErrBadPath) || !strings.Contains(err.Error(), fmt.Sprintf("%.40q", dir)[:40]) {
		t.Fatalf("commit of a path over 4095 bytes: %v; want %v naming it", err, store.ErrBadPath)
	}
	if got := d.head(t); got != head {
		t.Fatalf("head moved from %s to %s", head, got)
	}
}
