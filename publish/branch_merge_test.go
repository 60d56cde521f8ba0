package publish

import (
	"testing"

	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// TestRelate: how two commits' histories meet, including a merge commit
// whose nearer parent is an older ancestor of a (still a fast-forward),
// and histories with no commit in common.
func TestRelate(t *testing.T) {
	s := store.NewTestStore(t)
	n := 0
	commit := func(parents ...object.ID) object.ID {
		t.Helper()
		n++
		b := s.NewBatch()
		id, err := b.PutCommit(&store.Commit{Parents: parents, Origin: "operation:t", Message: string(rune('a' + n)), Time: int64(n)})
		if err == nil {
			err = b.Flush()
		}
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	root := commit()
	x := commit(root)
	a := commit(x)
	b1 := commit(a)        // a's descendant
	m := commit(root, b1)  // nearer parent root, a behind the other
	c := commit(x)         // diverged from a at x
	d := commit(commit(c)) // further from x
	other := commit()      // another root
	for _, tc := range []struct {
		name     string
		a, b     object.ID
		rel      relation
		wantBase object.ID
	}{
		{"same", a, a, behind, object.ID{}},
		{"b behind a", a, x, behind, object.ID{}},
		{"b ahead of a", a, b1, ahead, object.ID{}},
		{"ahead through a merge", a, m, ahead, object.ID{}},
		{"diverged", a, c, diverged, x},
		{"diverged further", a, d, diverged, x},
		{"unrelated", a, other, unrelated, object.ID{}},
	} {
		rel, base := relate(s, tc.a, tc.b)
		if rel != tc.rel || base != tc.wantBase {
			t.Errorf("%s: relate = %d, %s; want %d, %s", tc.name, rel, base.Short(), tc.rel, tc.wantBase.Short())
		}
	}
}
