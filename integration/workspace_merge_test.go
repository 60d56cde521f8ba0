package integration

import (
	"errors"
	"strings"
	"testing"

	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/sessions"
)

// TestSeedScenario is the seed's picture of the gate: agent-a edits
// src/auth.ts, agent-b edits hunk 1 of README.md, agent-c edits the same
// line of hunk 1 differently. a lands clean, b lands, c conflicts with
// markers in its Workspace, fixes them and lands; blame names each line's
// owner.
func TestSeedScenario(t *testing.T) {
	readme := "# Project\nline 2\nline 3\nline 4\nline 5\nline 6\nline 7\nline 8\n"
	d := startDaemon(t, map[string]string{"src/auth.ts": "export const auth = 1;\n", "README.md": readme}, sessions.Config{})
	a, b, c := d.create(t, "main"), d.create(t, "main"), d.create(t, "main")
	d.sh(t, a.ID, "echo 'export const auth = 2;' > src/auth.ts")
	d.sh(t, b.ID, "sed -i 's/^line 2$/line 2 by b/' README.md")
	d.sh(t, c.ID, "sed -i 's/^line 2$/line 2 by c/' README.md")
	d.commit(t, a.ID, api.StatusCommitted)
	d.commit(t, b.ID, api.StatusCommitted)
	res := d.commit(t, c.ID, api.StatusConflict)
	if len(res.Markers) != 1 || res.Markers[0] != "README.md" {
		t.Fatalf("markers %v conflicts %+v", res.Markers, res.Conflicts)
	}
	got := d.sh(t, c.ID, "cat README.md")
	if !strings.Contains(got, "<<<<<<< ours\nline 2 by c\n||||||| base\nline 2\n=======\nline 2 by b\n>>>>>>> head ") {
		t.Fatalf("c's README.md:\n%s", got)
	}
	if got := d.read(t, "main", "README.md"); strings.Contains(got, "by c") {
		t.Fatal("a conflict must commit nothing")
	}
	// c follows the new head: a's change is visible, its own pending.
	if got := d.sh(t, c.ID, "cat src/auth.ts"); got != "export const auth = 2;\n" {
		t.Fatalf("c after the conflict sees %q", got)
	}
	if _, err := d.Commit(c.ID, api.CommitRequest{}); err == nil || !strings.Contains(err.Error(), "conflict markers") {
		t.Fatalf("committing markers: %v", err)
	}
	d.sh(t, c.ID, `cat > README.md <<'EOF'
# Project
line 2 by b and c
line 3
line 4
line 5
line 6
line 7
line 8 by c
EOF`)
	d.commit(t, c.ID, api.StatusCommitted)
	blame, err := d.st.Blame("main", "README.md")
	if err != nil {
		t.Fatal(err)
	}
	var owners []string
	for _, r := range blame.Ranges {
		for i := r.Start; i <= r.End; i++ {
			owners = append(owners, r.Owner)
		}
	}
	want := []string{"original", "workspace_session:" + c.ID, "original", "original", "original", "original", "original", "workspace_session:" + c.ID}
	if strings.Join(owners, " ") != strings.Join(want, " ") {
		t.Errorf("blame README.md:\n got %v\nwant %v", owners, want)
	}
	if blame, _ := d.st.Blame("main", "src/auth.ts"); blame.Ranges[0].Owner != "workspace_session:"+a.ID {
		t.Errorf("blame src/auth.ts: %+v", blame.Ranges)
	}
}

// TestWorkspaceMergesDisjointHunks: two Workspaces edit different hunks of
// one file; both land, the second merged line by line.
func TestWorkspaceMergesDisjointHunks(t *testing.T) {
	d := startDaemon(t, map[string]string{"f.txt": "1\n2\n3\n4\n5\n6\n7\n8\n9\n"}, sessions.Config{})
	a, b := d.create(t, "main"), d.create(t, "main")
	d.sh(t, a.ID, "sed -i 's/^2$/two/' f.txt")
	d.sh(t, b.ID, "sed -i 's/^8$/eight/' f.txt")
	d.commit(t, a.ID, api.StatusCommitted)
	res := d.commit(t, b.ID, api.StatusCommitted)
	if len(res.Merged) != 1 {
		t.Fatalf("merged %v", res.Merged)
	}
	if got := d.read(t, "main", "f.txt"); got != "1\ntwo\n3\n4\n5\n6\n7\neight\n9\n" {
		t.Fatalf("merged file %q", got)
	}
}

// TestWorkspaceLockfileLastWriterWins: package-lock.json under /.lww
// changed in two Workspaces: the newer wins without a conflict, the
// decision is in the result and on the Commit; another file still merges.
func TestWorkspaceLockfileLastWriterWins(t *testing.T) {
	d := startDaemon(t, map[string]string{".lww": "package-lock.json\n", "package-lock.json": "{\"v\": 0}\n", "notes.txt": "1\n2\n3\n4\n5\n"}, sessions.Config{})
	a, b := d.create(t, "main"), d.create(t, "main")
	d.sh(t, a.ID, "echo '{\"v\": \"a\"}' > package-lock.json; sed -i 's/^1$/one/' notes.txt; touch -d '2020-01-01' package-lock.json")
	d.sh(t, b.ID, "echo '{\"v\": \"b\"}' > package-lock.json; sed -i 's/^5$/five/' notes.txt")
	d.commit(t, a.ID, api.StatusCommitted)
	res := d.commit(t, b.ID, api.StatusCommitted)
	if len(res.LWW) != 1 || res.LWW[0].Path != "package-lock.json" || res.LWW[0].Winner != "ours" {
		t.Fatalf("lww decisions %+v", res.LWW)
	}
	if got := d.read(t, "main", "package-lock.json"); got != "{\"v\": \"b\"}\n" {
		t.Fatalf("lockfile %q", got)
	}
	if got := d.read(t, "main", "notes.txt"); got != "one\n2\n3\n4\nfive\n" {
		t.Fatalf("notes %q", got)
	}
	head, _ := d.st.Backend().Branch("main")
	kept, err := d.st.Backend().LWW(head.Head)
	if err != nil || len(kept) != 1 {
		t.Fatalf("decision kept on the commit: %+v %v", kept, err)
	}
}

// TestWorkspaceOnSquashedLayer: a Workspace leased on a Commit whose Layer
// gets squashed still reads and commits.
func TestWorkspaceOnSquashedLayer(t *testing.T) {
	d := startDaemon(t, map[string]string{"log.txt": "0\n"}, sessions.Config{})
	main, err := d.st.FS("main")
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		if _, err := main.Append("log.txt", []byte(strings.Repeat("x", i)+"\n")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.st.Fork("old", "L3"); err != nil {
		t.Fatal(err)
	}
	w := d.create(t, "old")
	if _, err := d.st.Squash("L2", "L5"); err != nil {
		t.Fatal(err)
	}
	if got := d.sh(t, w.ID, "wc -l < log.txt"); strings.TrimSpace(got) != "3" {
		t.Fatalf("the leased view after the squash: %q lines", got)
	}
	d.sh(t, w.ID, "echo more >> log.txt")
	d.commit(t, w.ID, api.StatusCommitted)
	if got := d.read(t, "old", "log.txt"); !strings.HasSuffix(got, "more\n") {
		t.Fatalf("old after commit: %q", got)
	}
}

// TestWorkspaceUnsettledConflicts: conflicts that leave no marker blocks
// (a binary file both sides changed, a file one side deleted and the other
// changed) keep the Workspace's version, and a later commit refuses that
// version unchanged, so it cannot silently replace the head's; a new
// version settles the path, and force publishes the old one.
func TestWorkspaceUnsettledConflicts(t *testing.T) {
	d := startDaemon(t, map[string]string{"b.bin": "\x00bin\n", "gone.txt": "kept\n", "z.txt": "z\n"}, sessions.Config{})
	a, b := d.create(t, "main"), d.create(t, "main")
	d.sh(t, a.ID, `printf '\000binA' > b.bin; echo changed by a > gone.txt`)
	d.sh(t, b.ID, `printf '\000binB' > b.bin; rm gone.txt`)
	d.commit(t, a.ID, api.StatusCommitted)
	res := d.commit(t, b.ID, api.StatusConflict)
	if strings.Join(res.Workspace.Unsettled, " ") != "b.bin gone.txt" || len(res.Markers) != 0 {
		t.Fatalf("unsettled %v, markers %v, conflicts %+v", res.Workspace.Unsettled, res.Markers, res.Conflicts)
	}
	// Another change alone: the unsettled paths are refused as they are.
	d.sh(t, b.ID, "echo z by b > z.txt")
	_, err := d.Commit(b.ID, api.CommitRequest{})
	if !errors.Is(err, sessions.ErrUnsettled) || !strings.Contains(err.Error(), "b.bin (binary conflict with head") ||
		!strings.Contains(err.Error(), "gone.txt (delete conflict") {
		t.Fatalf("commit over unsettled conflicts: %v", err)
	}
	if got := d.read(t, "main", "b.bin"); got != "\x00binA" {
		t.Fatalf("main's b.bin after the refusal: %q", got)
	}
	if w, err := d.Inspect(b.ID); err != nil || strings.Join(w.Unsettled, " ") != "b.bin gone.txt" {
		t.Fatalf("inspect: %v %v", w.Unsettled, err)
	}
	// A new version settles b.bin; gone.txt still refuses.
	d.sh(t, b.ID, `printf '\000binAB' > b.bin`)
	if _, err := d.Commit(b.ID, api.CommitRequest{}); !errors.Is(err, sessions.ErrUnsettled) || strings.Contains(err.Error(), "b.bin") {
		t.Fatalf("commit with b.bin settled: %v", err)
	}
	// Forced, the deletion lands with the rest, and nothing is left unsettled.
	if res, err := d.Commit(b.ID, api.CommitRequest{Force: true}); err != nil || res.Status != api.StatusCommitted || len(res.Workspace.Unsettled) != 0 {
		t.Fatalf("forced commit: %+v %v", res, err)
	}
	if got := d.read(t, "main", "b.bin"); got != "\x00binAB" {
		t.Fatalf("main's b.bin: %q", got)
	}
	if got := d.read(t, "main", "z.txt"); got != "z by b\n" {
		t.Fatalf("main's z.txt: %q", got)
	}
	if f, err := d.st.FS("main"); err != nil {
		t.Fatal(err)
	} else if _, err := f.Read("gone.txt"); err == nil {
		t.Fatal("gone.txt still on main after the forced commit")
	}
}
