package store

import (
	"errors"
	"fmt"
	"strings"
	"testing"

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
	c1 := testCommit(t, s, "one")
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
	}
	for ref, want := range cases {
		r, err := s.Resolve(ref)
		if err != nil || r.Commit != want {
			t.Errorf("resolve %q = %s, %v; want %s", ref, r.Commit.Short(), err, want.Short())
		}
	}
	for _, ref := range []string{"nope", "L9", "deadbeef", "main~5", "", "main~x"} {
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
	if err := s.DeleteBranch("main"); err == nil {
		t.Error("deleting main must be refused")
	}
	if err := s.DeleteBranch("feature"); err != nil {
		t.Error(err)
	}
	if err := s.DeleteBranch("feature"); !errors.Is(err, ErrNotFound) {
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
