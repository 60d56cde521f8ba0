package layerfs

import (
	"fmt"
	"strings"
	"testing"

	"github.com/layerfs/layerfs/publish"
)

func TestMergeAndPublish(t *testing.T) {
	st, main := newProject(t)
	if _, err := st.Fork("feature", "main"); err != nil {
		t.Fatal(err)
	}
	feature, _ := st.FS("feature")
	expect(t, publish.Committed)(feature.Write("feature.txt", []byte("f\n"), Call{ID: "feat"}))
	// main has not moved: publishing fast-forwards it and adds a Layer.
	res, err := st.Publish("feature")
	if err != nil || !res.FastForward {
		t.Fatalf("publish: %+v %v", res, err)
	}
	if ls, _ := st.Layers(); len(ls) != 2 || ls[0].Commit != res.Commit {
		t.Fatalf("layers after publish: %+v", ls)
	}
	// Both move: a three-way merge with both heads as parents.
	expect(t, publish.Committed)(feature.Write("README.md", []byte("# hello\nfrom feature\n"), Call{ID: "feat2"}))
	expect(t, publish.Committed)(main.Write("main.txt", []byte("m\n"), Call{ID: "main1"}))
	res, err = st.Merge("main", "feature")
	if err != nil || res.Status != publish.Committed || res.FastForward {
		t.Fatalf("merge: %+v %v", res, err)
	}
	c, _ := st.Backend().Commit(res.Commit)
	fb, _ := st.Backend().Branch("feature")
	if len(c.Parents) != 2 || c.Parents[1] != fb.Head {
		t.Fatalf("merge commit parents %v", c.Parents)
	}
	for p, want := range map[string]string{"main.txt": "m\n", "feature.txt": "f\n", "README.md": "# hello\nfrom feature\n"} {
		if got := mustRead(t, main, p); got != want {
			t.Errorf("%s = %q", p, got)
		}
	}
	// Blame keeps the feature branch's owners through the merge.
	b, _ := st.Blame("main", "README.md")
	if len(b.Ranges) != 2 || b.Ranges[0].Owner != "original" || b.Ranges[1].Owner != "operation:feat2" {
		t.Errorf("blame after merge: %+v", b.Ranges)
	}
	if res, _ := st.Merge("main", "feature"); res.Status != publish.UpToDate {
		t.Errorf("merging again: %s", res.Status)
	}
	// Conflicting edits refuse the merge and write nothing.
	expect(t, publish.Committed)(feature.Write("main.txt", []byte("feature's\n")))
	expect(t, publish.Committed)(main.Write("main.txt", []byte("main's\n")))
	res, err = st.Merge("main", "feature")
	if err != nil || res.Status != publish.Conflict || res.Paths[0] != "main.txt" {
		t.Fatalf("conflicting merge: %+v %v", res, err)
	}
}

// TestSquashHundredLayers: squashing 100 Layers changes no branch's tree
// and no blame, and refs to squashed Layers keep working.
func TestSquashHundredLayers(t *testing.T) {
	st, main := newProject(t)
	for i := 0; i < 100; i++ {
		expect(t, publish.Committed)(main.Append("log.txt", []byte(fmt.Sprintf("line %d\n", i)), Call{ID: fmt.Sprint("w", i%7)}))
	}
	if _, err := st.Fork("old", "L50"); err != nil {
		t.Fatal(err)
	}
	before := snapshotBranches(t, st)
	blameBefore, _ := st.Blame("main", "log.txt")
	sq, err := st.Squash("L2", "L101")
	if err != nil {
		t.Fatal(err)
	}
	ls, _ := st.Layers()
	if len(ls) != 2 || ls[0].Seq != 101 || ls[0].ID != sq.ID || ls[1].Seq != 1 {
		t.Fatalf("manifest after squash: %+v", ls)
	}
	if !sq.Created.Equal(ls[0].Created) || sq.Created.IsZero() {
		t.Errorf("the squash's layer was created %v; the manifest says %v", sq.Created, ls[0].Created)
	}
	if after := snapshotBranches(t, st); after != before {
		t.Fatalf("a branch tree changed:\n%s\n%s", before, after)
	}
	blameAfter, _ := st.Blame("main", "log.txt")
	if fmt.Sprint(blameAfter.Ranges) != fmt.Sprint(blameBefore.Ranges) {
		t.Fatal("blame changed by the squash")
	}
	l50, err := st.FS("L50")
	if err != nil {
		t.Fatalf("a squashed layer's ref: %v", err)
	}
	if got, _ := l50.Read("log.txt"); strings.Count(string(got), "\n") != 49 {
		t.Errorf("L50 reads %d lines", strings.Count(string(got), "\n"))
	}
	if _, err := st.Fork("from-squashed", "L77"); err != nil {
		t.Fatal(err)
	}
	old, _ := st.FS("old")
	expect(t, publish.Committed)(old.Write("x", []byte("still writable")))
	for _, bad := range [][2]string{{"L5", "L3"}, {"L2", "L101"}, {"L1", "L999"}} {
		if _, err := st.Squash(bad[0], bad[1]); err == nil {
			t.Errorf("squash %v accepted", bad)
		}
	}
}

func snapshotBranches(t *testing.T, st *Store) string {
	bs, err := st.Backend().Branches()
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for _, b := range bs {
		c, _ := st.Backend().Commit(b.Head)
		fmt.Fprintf(&sb, "%s=%s ", b.Name, c.Tree.Short())
	}
	return sb.String()
}
