package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/layerfs/layerfs/object"
)

// commitTree stores an empty tree and a commit on it and returns the commit.
func testCommit(t *testing.T, s *Store, msg string, parents ...object.ID) object.ID {
	t.Helper()
	b := s.NewBatch()
	tree, err := b.PutTree(&Tree{})
	if err != nil {
		t.Fatal(err)
	}
	id, err := b.PutCommit(&Commit{Tree: tree, Parents: parents, Origin: "operation:test", Message: msg, Time: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestBranchesLayersAndResolve(t *testing.T) {
	s := NewTestStore(t)
	c0 := testCommit(t, s, "zero")
	c1 := testCommit(t, s, "one", c0)
	c2 := testCommit(t, s, "two", c1)
	if err := s.Update(func(tx *RefTx) error { return tx.CreateBranch(MainBranch, c1, "init") }); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(func(tx *RefTx) error { return tx.SetHead(MainBranch, c1, c2) }); err != nil {
		t.Fatal(err)
	}
	ls, err := s.Layers()
	if err != nil || len(ls) != 2 || ls[0].Commit != c2 || ls[1].Commit != c1 || ls[0].Seq != 2 {
		t.Fatalf("manifest after two heads on main: %+v %v", ls, err)
	}
	err = s.Update(func(tx *RefTx) error { return tx.SetHead(MainBranch, c1, c2) })
	if !errors.Is(err, ErrStale) {
		t.Errorf("compare-and-swap from a stale head: %v, want ErrStale", err)
	}
	if _, err := s.Fork("feature", "L1"); err != nil {
		t.Fatal(err)
	}
	cases := map[string]object.ID{
		"main":                 c2,
		"main~1":               c1,
		"main~":                c1,
		"feature":              c1,
		"L1":                   c1,
		"L000002":              c2,
		c2.String():            c2,
		c1.String()[:10]:       c1,
		ls[0].ID.String()[:12]: c2,
		"feature~0":            c1,
		"main~~":               c0,
		"main~1~1":             c0,
		"main~0~2":             c0,
	}
	for ref, want := range cases {
		r, err := s.Resolve(ref)
		if err != nil || r.Commit != want {
			t.Errorf("resolve %q = %s, %v; want %s", ref, r.Commit.Short(), err, want.Short())
		}
	}
	for _, ref := range []string{"nope", "L9", "deadbeef", "main~5", "", "main~x", "main~1~x", "main~1~~2"} {
		if _, err := s.Resolve(ref); err == nil {
			t.Errorf("resolve %q succeeded", ref)
		} else if !strings.Contains(err.Error(), strings.TrimSuffix(ref, "~x")) {
			t.Errorf("resolve %q: error %q does not name the ref", ref, err)
		}
	}
	if _, err := s.Fork("feature", "main"); !errors.Is(err, ErrExists) {
		t.Errorf("fork onto an existing name: %v", err)
	}
	if _, err := s.Fork("x", "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("fork from an unknown ref: %v", err)
	}
	for _, ref := range []string{"", "~1"} { // a ref with no name is bad, not missing
		if _, err := s.Resolve(ref); !errors.Is(err, ErrBadName) {
			t.Errorf("resolve %q: %v, want ErrBadName", ref, err)
		}
	}
	if err := s.DeleteBranch("main", false); err == nil {
		t.Error("deleting main must be refused")
	}
	if err := s.DeleteBranch("feature", false); err != nil {
		t.Error(err)
	}
	if err := s.DeleteBranch("feature", false); !errors.Is(err, ErrNotFound) {
		t.Errorf("delete twice: %v", err)
	}
}

func TestAmbiguousPrefix(t *testing.T) {
	s := NewTestStore(t)
	seen := map[string]object.ID{}
	for i := 0; ; i++ {
		id := testCommit(t, s, fmt.Sprint("commit ", i))
		p := id.String()[:4]
		if other, ok := seen[p]; ok {
			_, err := s.Resolve(p)
			if !errors.Is(err, ErrAmbiguous) || !strings.Contains(err.Error(), other.Short()) || !strings.Contains(err.Error(), id.Short()) {
				t.Fatalf("resolve ambiguous %q: %v, want ErrAmbiguous naming both", p, err)
			}
			if r, err := s.Resolve(id.String()[:20]); err != nil || r.Commit != id {
				t.Fatalf("a longer prefix must resolve: %v", err)
			}
			return
		}
		seen[p] = id
	}
}

func TestBranchNames(t *testing.T) {
	for _, ok := range []string{"main", "agent-7", "feat/x.y", "a_b"} {
		if err := CheckBranchName(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "-x", "a..b", "a b", "L12", "x~1", "a:b", "a/", "a//b", strings.Repeat("x", 201)} {
		if err := CheckBranchName(bad); !errors.Is(err, ErrBadName) {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestBranchNamesDoNotNest: as in git, "team" and "team/alice" cannot
// both be branches, in either order; "team-b" and "teams" can.
func TestBranchNamesDoNotNest(t *testing.T) {
	s := NewTestStore(t)
	c1 := testCommit(t, s, "one")
	if err := s.Update(func(tx *RefTx) error { return tx.CreateBranch(MainBranch, c1, "init") }); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		ok   bool
	}{{"team/alice", true}, {"team", false}, {"team/alice/x", false}, {"team-b", true}, {"teams", true}, {"main/x", false}, {"team/bob", true}, {"faces", true}} {
		_, err := s.Fork(c.name, "main")
		if c.ok && err != nil {
			t.Errorf("fork %s: %v", c.name, err)
		}
		if !c.ok && (!errors.Is(err, ErrExists) || !strings.Contains(err.Error(), "in the way")) {
			t.Errorf("fork %s: %v, want a clash", c.name, err)
		}
	}
	// A name that reads as a commit id prefix would hide the commits
	// whose ids start so, whether there are any yet or not.
	for _, name := range []string{c1.String()[:6], "face", "C0FFEE"} {
		if _, err := s.Fork(name, "main"); !errors.Is(err, ErrBadName) || !strings.Contains(err.Error(), "commit id prefix") {
			t.Errorf("fork %s: %v, want it refused", name, err)
		}
	}
}

func TestLeasesPinCommits(t *testing.T) {
	s := NewTestStore(t)
	c1 := testCommit(t, s, "one")
	c2 := testCommit(t, s, "two", c1)
	if err := s.SetLease("ws-1", "main", "host:1", c1); err != nil {
		t.Fatal(err)
	}
	if err := s.SetLease("ws-1", "main", "host:1", c2); err != nil {
		t.Fatal(err)
	}
	ls, err := s.Leases()
	if err != nil || len(ls) != 1 || ls[0].Commit != c2 || ls[0].Holder != "host:1" {
		t.Fatalf("leases: %+v %v", ls, err)
	}
	rep, err := s.Fsck()
	if err != nil || rep.Objects < 3 {
		t.Errorf("fsck must walk leased commits: %+v %v", rep, err)
	}
	if err := s.DropLease("ws-1"); err != nil {
		t.Fatal(err)
	}
	if ls, _ := s.Leases(); len(ls) != 0 {
		t.Errorf("after drop: %+v", ls)
	}
}

// TestDropLeaseSoon: a lease DropLeaseSoon released stays recorded (as
// another process sees the Store) until the next write commits, a
// leaseDropDelay passes, Leases is asked, or the Store closes; a write
// that rolls back keeps it for a later one.
func TestDropLeaseSoon(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.layerfs")
	s, err := Open(path, Options{Create: true, Durability: Fast})
	if err != nil {
		t.Fatal(err)
	}
	other, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	c := testCommit(t, s, "one")
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		if err := s.SetLease(id, "main", "h", c); err != nil {
			t.Fatal(err)
		}
	}
	seen := func() string {
		t.Helper()
		// other has no drops of its own to write first.
		ls, err := other.Leases()
		if err != nil {
			t.Fatal(err)
		}
		ids := ""
		for _, l := range ls {
			ids += l.ID
		}
		return ids
	}

	// Carried by the next write that commits, not by one that rolls back.
	s.DropLeaseSoon("a")
	if got := seen(); got != "abcde" {
		t.Fatalf("right after DropLeaseSoon another process sees %q", got)
	}
	if err := s.Update(func(*RefTx) error { return errors.New("no") }); err == nil {
		t.Fatal("the failing update succeeded")
	}
	if got := seen(); got != "abcde" {
		t.Fatalf("after a rolled-back write: %q", got)
	}
	if err := s.SetLease("f", "main", "h", c); err != nil {
		t.Fatal(err)
	}
	if got := seen(); got != "bcdef" {
		t.Fatalf("after the next write: %q", got)
	}

	// Written within leaseDropDelay with no other write.
	s.DropLeaseSoon("b")
	deadline := time.Now().Add(2 * time.Second)
	for seen() != "cdef" {
		if time.Now().After(deadline) {
			t.Fatalf("b still recorded %v after DropLeaseSoon: %q", 2*time.Second, seen())
		}
		time.Sleep(leaseDropDelay / 4)
	}

	// Written before this process lists leases, and at Close.
	s.DropLeaseSoon("c")
	if ls, err := s.Leases(); err != nil || len(ls) != 3 {
		t.Fatalf("Leases after DropLeaseSoon(c): %+v, %v", ls, err)
	}
	s.DropLeaseSoon("d")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := seen(); got != "ef" {
		t.Fatalf("after Close: %q", got)
	}
}

// TestDeleteLeasedBranch: a branch with a Lease on it is refused, naming
// the Lease and its holder, until forced or the Lease is dropped.
func TestDeleteLeasedBranch(t *testing.T) {
	s := NewTestStore(t)
	c1 := testCommit(t, s, "first")
	if err := s.Update(func(tx *RefTx) error { return tx.CreateBranch(MainBranch, c1, "init") }); err != nil {
		t.Fatal(err)
	}
	head, err := s.Fork("feat", "main")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetLease("ws-1", "feat", "host:42", head.Head); err != nil {
		t.Fatal(err)
	}
	err = s.DeleteBranch("feat", false)
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "ws-1 (held by host:42)") {
		t.Fatalf("delete of a leased branch: %v", err)
	}
	if _, err := s.Branch("feat"); err != nil {
		t.Fatalf("the refused delete removed the branch: %v", err)
	}
	if err := s.DropLease("ws-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetLease("ws-2", "feat", "host:43", head.Head); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteBranch("feat", true); err != nil {
		t.Fatalf("forced delete: %v", err)
	}
	if _, err := s.Branch("feat"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after the forced delete: %v", err)
	}
}
