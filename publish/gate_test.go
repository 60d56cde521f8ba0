package publish

import (
	"errors"
	"strings"
	"testing"

	"github.com/layerfs/layerfs/extents"
	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// repo is a Store with a main branch, for gate tests.
type repo struct {
	t *testing.T
	s *store.Store
}

func newRepo(t *testing.T, files map[string]string) *repo {
	t.Helper()
	s := store.NewTestStore(t)
	emptyMain(t, s)
	r := &repo{t, s}
	if len(files) > 0 {
		r.publish(r.head(), "operation:setup", 10, files, nil)
	}
	return r
}

// emptyMain makes s's main branch, at a Commit of an empty tree, and
// returns that Commit.
func emptyMain(tb testing.TB, s *store.Store) object.ID {
	tb.Helper()
	b := s.NewBatch()
	tree, _ := b.PutTree(&store.Tree{})
	c, _ := b.PutCommit(&store.Commit{Tree: tree, Origin: store.OriginInit, Time: 1})
	if err := b.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := s.Update(func(tx *store.RefTx) error { return tx.CreateBranch("main", c, "test") }); err != nil {
		tb.Fatal(err)
	}
	return c
}

func (r *repo) head() object.ID {
	b, err := r.s.Branch("main")
	if err != nil {
		r.t.Fatal(err)
	}
	return b.Head
}

// publish writes files (content "" with deleted listing a delete) from
// base, with every new entry's mtime set to mtime.
func (r *repo) publish(base object.ID, origin string, mtime int64, files map[string]string, deleted []string, meta ...Meta) *Result {
	r.t.Helper()
	st := r.s.NewStage()
	cs := &Changeset{Base: base}
	for p, data := range files {
		f, err := extents.WriteBytes(st, []byte(data))
		if err != nil {
			r.t.Fatal(err)
		}
		cs.Changes = append(cs.Changes, Change{Path: p, Entry: &store.Entry{Type: store.TypeFile, Mode: 0o644, ID: f.ID, Size: f.Size, MTime: mtime}})
	}
	for _, p := range deleted {
		cs.Changes = append(cs.Changes, Change{Path: p})
	}
	m := Meta{Origin: origin, Message: "test"}
	if len(meta) > 0 {
		m = meta[0]
		m.Origin = origin
	}
	res, err := Publish(r.s, "main", cs, st, m)
	if err != nil {
		r.t.Fatal(err)
	}
	return res
}

func (r *repo) read(p string) string {
	r.t.Helper()
	c, _ := r.s.Commit(r.head())
	e, err := r.s.Lookup(c.Tree, p)
	if err != nil {
		r.t.Fatal(err)
	}
	data, err := readAll(r.s, &e)
	if err != nil {
		r.t.Fatal(err)
	}
	return string(data)
}

func TestGateMergesDisjointHunks(t *testing.T) {
	r := newRepo(t, map[string]string{"f.txt": "1\n2\n3\n4\n5\n6\n7\n8\n"})
	base := r.head()
	r.publish(base, "operation:head", 20, map[string]string{"f.txt": "1\nTWO\n3\n4\n5\n6\n7\n8\n"}, nil)
	res := r.publish(base, "operation:ours", 30, map[string]string{"f.txt": "1\n2\n3\n4\n5\n6\n7\nEIGHT\n"}, nil)
	if res.Status != Committed || len(res.Merged) != 1 || res.Merged[0].Path != "f.txt" {
		t.Fatalf("merge: %s merged %v conflicts %v", res.Status, res.Merged, res.Paths)
	}
	if got := r.read("f.txt"); got != "1\nTWO\n3\n4\n5\n6\n7\nEIGHT\n" {
		t.Fatalf("merged content %q", got)
	}
	own := ownersAt(t, r, "f.txt")
	want := "operation:setup operation:head operation:setup operation:setup operation:setup operation:setup operation:setup operation:ours"
	if own != want {
		t.Errorf("blame through the merge:\n got %s\nwant %s", own, want)
	}
}

// TestBlameBeforeTheAuditLands: a Commit whose ownership is recorded
// after it lands (deferred, as a Workspace's commit does, or because head
// moved) can have another land on top before it is. That one's ownership,
// and blame meanwhile, are worked out from history instead of reading
// "unknown" for good; a merge against it too.
func TestBlameBeforeTheAuditLands(t *testing.T) {
	r := newRepo(t, map[string]string{"f.txt": "1\n2\n3\n4\n5\n6\n"})
	base := r.head()
	r.publish(base, "operation:a", 10, map[string]string{"f.txt": "1\nA\n3\n4\n5\n6\n"}, nil)
	deferred := r.publish(r.head(), "operation:b", 20, map[string]string{"f.txt": "1\nA\n3\nB\n5\n6\n"}, nil, Meta{DeferAudit: true})
	if got, want := ownersAt(t, r, "f.txt"), "operation:setup operation:a operation:setup operation:b operation:setup operation:setup"; got != want {
		t.Errorf("blame before the audit:\n got %s\nwant %s", got, want)
	}
	r.publish(r.head(), "operation:c", 30, map[string]string{"f.txt": "C\nA\n3\nB\n5\n6\n"}, nil)
	r.publish(base, "operation:d", 40, map[string]string{"f.txt": "1\n2\n3\n4\n5\nD\n"}, nil) // merged
	if deferred.FinishAudit(); deferred.AuditErr != nil {
		t.Fatal(deferred.AuditErr)
	}
	if got, want := ownersAt(t, r, "f.txt"), "operation:c operation:a operation:setup operation:b operation:setup operation:d"; got != want {
		t.Errorf("blame of commits on top of one whose audit was deferred:\n got %s\nwant %s", got, want)
	}
}

func ownersAt(t *testing.T, r *repo, p string) string {
	t.Helper()
	c, _ := r.s.Commit(r.head())
	b, err := Blame(r.s, c.Tree, r.head(), p)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, rg := range b.Ranges {
		for i := rg.Start; i <= rg.End; i++ {
			out = append(out, rg.Owner)
		}
	}
	return strings.Join(out, " ")
}

func TestGateConflictKinds(t *testing.T) {
	r := newRepo(t, map[string]string{"t.txt": "a\nb\nc\n", "d.txt": "x\n", "bin": "\x00\x01\x02"})
	base := r.head()
	r.publish(base, "operation:head", 20, map[string]string{"t.txt": "a\nHEAD\nc\n", "bin": "\x00\x09"}, []string{"d.txt"})
	res := r.publish(base, "operation:ours", 30, map[string]string{"t.txt": "a\nOURS\nc\n", "d.txt": "y\n", "bin": "\x00\x08"}, nil)
	if res.Status != Conflict {
		t.Fatalf("status %s", res.Status)
	}
	kinds := map[string]string{}
	for _, c := range res.Conflicts {
		kinds[c.Path] = c.Kind
	}
	if kinds["t.txt"] != ConflictText || kinds["d.txt"] != ConflictDelete || kinds["bin"] != ConflictBinary {
		t.Fatalf("conflict kinds %v", kinds)
	}
	for _, c := range res.Conflicts {
		if c.Path == "t.txt" && !strings.Contains(strings.Join(c.Merge.WithMarkers("h"), ""), "<<<<<<< ours\nOURS\n||||||| base\nb\n=======\nHEAD\n>>>>>>> head h\n") {
			t.Errorf("markers: %q", c.Merge.WithMarkers("h"))
		}
	}
	if got := r.read("t.txt"); got != "a\nHEAD\nc\n" {
		t.Errorf("a conflict must write nothing: %q", got)
	}
}

func TestGateLastWriterWins(t *testing.T) {
	r := newRepo(t, map[string]string{".lww": "package-lock.json\n%include more.lww\n", "more.lww": "*.gen\n", "package-lock.json": "v0\n", "x.gen": "g0\n", "src.txt": "1\n2\n3\n"})
	base := r.head()
	r.publish(base, "operation:head", 100, map[string]string{"package-lock.json": "head\n", "x.gen": "head\n", "src.txt": "ONE\n2\n3\n"}, nil)
	res := r.publish(base, "operation:ours", 50, map[string]string{"package-lock.json": "ours\n", "x.gen": "ours\n", "src.txt": "1\n2\nTHREE\n"}, nil)
	if res.Status != Committed || len(res.LWW) != 2 {
		t.Fatalf("lww: %s %+v %v", res.Status, res.LWW, res.Paths)
	}
	for _, d := range res.LWW {
		if d.Winner != store.LWWHead || d.HeadMTime != 100 || d.OursMTime != 50 {
			t.Errorf("decision %+v: the newer (head) must win", d)
		}
	}
	if got := r.read("package-lock.json") + r.read("x.gen") + r.read("src.txt"); got != "head\nhead\nONE\n2\nTHREE\n" {
		t.Errorf("after lww: %q", got)
	}
	kept, err := r.s.LWW(res.Commit)
	if err != nil || len(kept) != 2 {
		t.Errorf("decisions kept on the commit: %+v %v", kept, err)
	}
	// Newer ours wins; a tie goes to ours.
	base = r.head()
	r.publish(base, "operation:head", 200, map[string]string{"package-lock.json": "head2\n"}, nil)
	res = r.publish(base, "operation:ours", 200, map[string]string{"package-lock.json": "ours2\n"}, nil)
	if res.Status != Committed || res.LWW[0].Winner != store.LWWOurs || r.read("package-lock.json") != "ours2\n" {
		t.Errorf("tie: %+v %q", res.LWW, r.read("package-lock.json"))
	}
}

func TestGateRefusesMarkersUnlessForced(t *testing.T) {
	r := newRepo(t, map[string]string{"f.txt": "x\n"})
	marked := "a\n<<<<<<< ours\nb\n||||||| base\nc\n=======\nd\n>>>>>>> head 1234\n"
	st := r.s.NewStage()
	f, _ := extents.WriteBytes(st, []byte(marked))
	cs := &Changeset{Changes: []Change{{Path: "f.txt", Entry: &store.Entry{Type: store.TypeFile, Mode: 0o644, ID: f.ID, Size: f.Size}}}}
	if _, err := Publish(r.s, "main", cs, st, Meta{Origin: "operation:x"}); !errors.Is(err, ErrMarkers) {
		t.Fatalf("markers accepted: %v", err)
	}
	res, err := Publish(r.s, "main", cs, st, Meta{Origin: "operation:x", Force: true})
	if err != nil || res.Status != Committed {
		t.Fatalf("forced: %v", err)
	}
}

func TestGateIgnoredPathsAreNotValidated(t *testing.T) {
	r := newRepo(t, map[string]string{".layerfsignore": "build/\n", "build/out": "0\n"})
	base := r.head()
	r.publish(base, "operation:head", 20, map[string]string{"build/out": "head\n"}, nil)
	res := r.publish(base, "operation:ours", 30, map[string]string{"build/out": "ours\n"}, nil)
	if res.Status != Committed || r.read("build/out") != "ours\n" {
		t.Fatalf("ignored path: %s %q", res.Status, r.read("build/out"))
	}
}

func TestGateBothDeleteIsClean(t *testing.T) {
	r := newRepo(t, map[string]string{"a": "1\n", "b": "2\n"})
	base := r.head()
	r.publish(base, "operation:head", 20, nil, []string{"a"})
	if res := r.publish(base, "operation:ours", 30, map[string]string{"b": "3\n"}, []string{"a"}); res.Status != Committed {
		t.Fatalf("both deleted a: %s %v", res.Status, res.Paths)
	}
}

// TestGateLanding: Meta.Landing runs in the transaction that lands the
// Commit, with its ID, also when the head moved and the Commit was redone
// under the lock; when it fails, nothing lands.
func TestGateLanding(t *testing.T) {
	r := newRepo(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	base := r.head()
	r.publish(base, "operation:other", 20, map[string]string{"b.txt": "B\n"}, nil) // head moves past base
	var landed object.ID
	res := r.publish(base, "operation:lease", 30, map[string]string{"a.txt": "A\n"}, nil, Meta{
		Landing: func(tx *store.RefTx, commit object.ID) error {
			landed = commit
			return tx.SetLease("ws-1", "main", "test", commit)
		}})
	if res.Status != Committed || landed != res.Commit {
		t.Fatalf("status %v, Landing saw %s, landed %s", res.Status, landed.Short(), res.Commit.Short())
	}
	leases, err := r.s.Leases()
	if err != nil || len(leases) != 1 || leases[0].Commit != res.Commit {
		t.Fatalf("leases %+v, %v: want ws-1 on %s", leases, err, res.Commit.Short())
	}

	head := r.head()
	st := r.s.NewStage()
	f, _ := extents.WriteBytes(st, []byte("never\n"))
	cs := &Changeset{Base: head, Changes: []Change{{Path: "c.txt", Entry: &store.Entry{Type: store.TypeFile, Mode: 0o644, ID: f.ID, Size: f.Size}}}}
	refused := errors.New("refused")
	_, err = Publish(r.s, "main", cs, st, Meta{Origin: "operation:x", Landing: func(*store.RefTx, object.ID) error { return refused }})
	if !errors.Is(err, refused) {
		t.Fatalf("Publish with a failing Landing: %v, want it", err)
	}
	if r.head() != head {
		t.Fatal("the branch moved although Landing failed")
	}
}

// TestPublishStopsStageReadsThroughWriter: a Stage left reading through
// the writer's connection (a capture's) is turned back before Publish's
// transaction, which may read it when the head moves under it (and would
// then, but for Stage.Get's check that the connection is idle, wait for
// its own connection). Here the head moved before: the merge still lands.
func TestPublishStopsStageReadsThroughWriter(t *testing.T) {
	r := newRepo(t, map[string]string{"a.txt": "1\n2\n3\n4\n5\n6\n7\n8\n"})
	base := r.head()
	r.publish(base, "operation:other", 20, map[string]string{"a.txt": "one\n2\n3\n4\n5\n6\n7\n8\n"}, nil)
	st := r.s.NewStage()
	f, err := extents.WriteBytes(st, []byte("1\n2\n3\n4\n5\n6\n7\neight\n"))
	if err != nil {
		t.Fatal(err)
	}
	cs := &Changeset{Base: base, Changes: []Change{{Path: "a.txt", Entry: &store.Entry{Type: store.TypeFile, Mode: 0o644, ID: f.ID, Size: f.Size, MTime: 30}}}}
	if was := st.ReadThroughWriter(true); was {
		t.Fatal("a new Stage reads through the writer")
	}
	res, err := Publish(r.s, "main", cs, st, Meta{Origin: "operation:merge", Message: "test"})
	if err != nil || res.Status != Committed {
		t.Fatalf("publish: %v %v", res, err)
	}
	if on := st.ReadThroughWriter(false); on {
		t.Error("the Stage still reads through the writer after Publish")
	}
	if got := r.read("a.txt"); got != "one\n2\n3\n4\n5\n6\n7\neight\n" {
		t.Errorf("merged a.txt = %q", got)
	}
}

// A directory head removed, which ours only touched (its mtime, as a
// file the ignore rules keep out changes it): head's removal stands. With
// something new below it, ours brings it back.
func TestGateMetadataOfARemovedDirectory(t *testing.T) {
	r := newRepo(t, map[string]string{"a.txt": "a\n", "out/x": "x\n", "out/sub/z": "z\n", "keep/y": "y\n"})
	base := r.head()
	r.publish(base, "operation:head", 20, nil, []string{"out", "keep"})
	touched := func(p string) Change {
		return Change{Path: p, Entry: &store.Entry{Type: store.TypeDir, Mode: 0o755, MTime: 99}}
	}
	st := r.s.NewStage()
	f, err := extents.WriteBytes(st, []byte("new\n"))
	if err != nil {
		t.Fatal(err)
	}
	cs := &Changeset{Base: base, Changes: []Change{touched("out"), touched("out/sub"), touched("keep"),
		{Path: "keep/new", Entry: &store.Entry{Type: store.TypeFile, Mode: 0o644, ID: f.ID, Size: f.Size, MTime: 30}}}}
	res, err := Publish(r.s, "main", cs, st, Meta{Origin: "operation:ours", Message: "test"})
	if err != nil || res.Status != Committed {
		t.Fatalf("publish: %v, %v", res, err)
	}
	c, _ := r.s.Commit(r.head())
	if _, err := r.s.Lookup(c.Tree, "out"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("out after ours: %v; want it still removed", err)
	}
	if got := r.read("keep/new"); got != "new\n" {
		t.Errorf("keep/new: %q", got)
	}
	if e, err := r.s.Lookup(c.Tree, "keep"); err != nil || e.MTime != 99 {
		t.Errorf("keep: %+v, %v; want ours, mtime 99", e, err)
	}
}

// A path the head has just begun to ignore, removing it on the way, is
// still validated: ours, from a base that tracked it, conflicts rather
// than bring it back unseen.
func TestGateNewlyIgnoredPathsAreValidated(t *testing.T) {
	r := newRepo(t, map[string]string{"a.txt": "a\n", "gen/x.go": "package gen\n"})
	base := r.head()
	r.publish(base, "operation:head", 20, map[string]string{".layerfsignore": "gen/\n"}, []string{"gen"})
	res := r.publish(base, "operation:ours", 30, map[string]string{"gen/x.go": "package gen // rebuilt\n"}, nil)
	if res.Status != Conflict {
		t.Fatalf("ours over a newly ignored, removed path: %s %v; want a conflict", res.Status, res.Paths)
	}
}

// TestGateSameChangeKeepsHeadsEntry: a path ours changed exactly as head
// did (content and mode; the mtime differs) keeps head's entry: the
// Commit changes only the other paths, and a change that only repeats
// head's is up to date. Ours' entry landed, a change of mtime alone
// that diffs listed as modified with nothing to show.
func TestGateSameChangeKeepsHeadsEntry(t *testing.T) {
	r := newRepo(t, map[string]string{"a": "1\n", "b": "2\n"})
	base := r.head()
	r.publish(base, "operation:head", 20, map[string]string{"a": "same\n"}, nil)
	head := r.head()
	res := r.publish(base, "operation:ours", 30, map[string]string{"a": "same\n", "b": "3\n"}, nil)
	if res.Status != Committed {
		t.Fatalf("ours: %s %v", res.Status, res.Paths)
	}
	if got := changedPaths(t, r.s, head, r.head()); got != "b" {
		t.Errorf("the Commit changes %q, want b alone", got)
	}
	if e := r.entry("a"); e.MTime != 20 {
		t.Errorf("a's mtime %d, want head's 20", e.MTime)
	}
	head = r.head()
	if res := r.publish(base, "operation:again", 40, map[string]string{"a": "same\n"}, nil); res.Status != UpToDate || r.head() != head {
		t.Errorf("a change that repeats head's: %s, head moved %v", res.Status, r.head() != head)
	}
}

// TestMergeBranchesSameChange: a branch merge where both branches made
// the same edit lists only what the merged branch alone changed.
func TestMergeBranchesSameChange(t *testing.T) {
	r := newRepo(t, map[string]string{"a": "1\n", "b": "2\n"})
	if err := r.s.Update(func(tx *store.RefTx) error { return tx.CreateBranch("fork", r.head(), "test") }); err != nil {
		t.Fatal(err)
	}
	r.publish(r.head(), "operation:main", 20, map[string]string{"a": "same\n"}, nil)
	st := r.s.NewStage()
	cs := &Changeset{}
	for p, data := range map[string]string{"a": "same\n", "b": "3\n"} {
		f, err := extents.WriteBytes(st, []byte(data))
		if err != nil {
			t.Fatal(err)
		}
		cs.Changes = append(cs.Changes, Change{Path: p, Entry: &store.Entry{Type: store.TypeFile, Mode: 0o644, ID: f.ID, Size: f.Size, MTime: 30}})
	}
	if _, err := Publish(r.s, "fork", cs, st, Meta{Origin: "operation:fork", Message: "fork"}); err != nil {
		t.Fatal(err)
	}
	before := r.head()
	res, err := MergeBranches(r.s, "main", "fork", Meta{Origin: "operation:merge"})
	if err != nil || res.Status != Committed || res.FastForward {
		t.Fatalf("merge: %+v, %v", res, err)
	}
	if got := changedPaths(t, r.s, before, r.head()); got != "b" {
		t.Errorf("the merge changes %q on main, want b alone", got)
	}
}

// entry is path's entry at main's head.
func (r *repo) entry(p string) store.Entry {
	r.t.Helper()
	c, _ := r.s.Commit(r.head())
	e, err := r.s.Lookup(c.Tree, p)
	if err != nil {
		r.t.Fatal(err)
	}
	return e
}

// changedPaths lists the paths that differ from commit a's tree to b's.
func changedPaths(t *testing.T, s *store.Store, a, b object.ID) string {
	t.Helper()
	ac, err := s.Commit(a)
	if err != nil {
		t.Fatal(err)
	}
	bc, err := s.Commit(b)
	if err != nil {
		t.Fatal(err)
	}
	diffs, err := DiffTrees(s, ac.Tree, bc.Tree)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, d := range diffs {
		paths = append(paths, d.Path)
	}
	return strings.Join(paths, " ")
}

// TestPreviewLandsNothing: Preview finds what Publish would — here the
// merged text of a file both sides changed, and a conflict — and the
// branch stays where it was.
func TestPreviewLandsNothing(t *testing.T) {
	r := newRepo(t, map[string]string{"m.txt": "1\n2\n3\n4\n5\n", "c.txt": "c\n"})
	base := r.head()
	r.publish(base, "operation:theirs", 20, map[string]string{"m.txt": "one\n2\n3\n4\n5\n", "c.txt": "theirs\n"}, nil)
	head := r.head()
	st := r.s.NewStage()
	cs := &Changeset{Base: base}
	for p, data := range map[string]string{"m.txt": "1\n2\n3\n4\nfive\n", "c.txt": "<<<<<<< ours\n=======\n>>>>>>> head\n"} {
		f, err := extents.WriteBytes(st, []byte(data))
		if err != nil {
			t.Fatal(err)
		}
		cs.Changes = append(cs.Changes, Change{Path: p, Entry: &store.Entry{Type: store.TypeFile, Mode: 0o644, ID: f.ID, Size: f.Size, MTime: 30}})
	}
	res, err := Preview(r.s, cs, st, head)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != Conflict || res.Head != head || len(res.Merged) != 1 || string(res.Merged[0].Content) != "one\n2\n3\n4\nfive\n" ||
		len(res.Conflicts) != 1 || res.Conflicts[0].Path != "c.txt" {
		t.Fatalf("preview: %+v", res)
	}
	if r.head() != head || r.read("m.txt") != "one\n2\n3\n4\n5\n" {
		t.Fatalf("the preview moved main to %s", r.head().Short())
	}
}
