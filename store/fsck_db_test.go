package store

import (
	"errors"
	"strings"
	"testing"
)

// TestFsckRunsIntegrityCheck: damage SQLite's file itself — here an
// index whose entries no longer match its definition — is a problem fsck
// reports, though every object still reads back whole.
func TestFsckRunsIntegrityCheck(t *testing.T) {
	s := NewTestStore(t)
	if rep, err := s.Fsck(); err != nil || !rep.OK() {
		t.Fatalf("a new Store: %+v %v", rep, err)
	}
	for _, q := range []string{
		`CREATE TABLE damage (a INTEGER)`,
		`CREATE INDEX damage_a ON damage (a)`,
		`INSERT INTO damage VALUES (1), (2)`,
		`PRAGMA writable_schema = ON`,
		`UPDATE sqlite_schema SET sql = 'CREATE INDEX damage_a ON damage (a + 1)' WHERE name = 'damage_a'`,
		`PRAGMA writable_schema = OFF`,
	} {
		if _, err := s.w.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// The readers see the changed schema once it is read again.
	s.r.Exec(`PRAGMA schema_version`)
	rep, err := s.Fsck()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range rep.Problems {
		found = found || p.What == "database" && strings.Contains(p.Err, "damage_a")
	}
	if !found {
		t.Fatalf("fsck of a damaged index: %+v", rep.Problems)
	}
	if _, err := s.w.Exec(`DROP TABLE damage`); err != nil { // for the cleanup's fsck
		t.Fatal(err)
	}
}

// TestDamagedBranchHead: a branch row whose head is not an object id is
// damage (ErrCorrupt), not an ordinary error.
func TestDamagedBranchHead(t *testing.T) {
	s := NewTestStore(t)
	c1 := testCommit(t, s, "one")
	if err := s.Update(func(tx *RefTx) error { return tx.CreateBranch(MainBranch, c1, "init") }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.Exec(`UPDATE branches SET head = X'0102' WHERE name = 'main'`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Branches(); !errors.Is(err, ErrCorrupt) {
		t.Errorf("branches: %v", err)
	}
	if _, err := s.Resolve("main"); !errors.Is(err, ErrCorrupt) {
		t.Errorf("resolve: %v", err)
	}
	// fsck reports the row, and checks the other branches all the same.
	c2 := testCommit(t, s, "two")
	if err := s.Update(func(tx *RefTx) error { return tx.CreateBranch("other", c2, "fork") }); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Fsck()
	if err != nil || len(rep.Problems) != 1 || rep.Problems[0].From != "branch main" || rep.Objects == 0 {
		t.Errorf("fsck: %+v, %v", rep, err)
	}
	if _, err := s.w.Exec(`UPDATE branches SET head = ? WHERE name = 'main'`, c1[:]); err != nil { // for the cleanup's fsck
		t.Fatal(err)
	}
}
