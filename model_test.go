package layerfs

import (
	"math/rand"
	"testing"

	"github.com/layerfs/layerfs/internal/mergemodel"
	"github.com/layerfs/layerfs/publish"
)

// TestGateMatchesModel: random concurrent edits by several actors land
// through the gate; after every publish the branch equals an in-memory
// reference of the merge rules, and nothing accepted is ever lost.
func TestGateMatchesModel(t *testing.T) {
	st, f := newProject(t)
	r := rand.New(rand.NewSource(11))
	model := map[string]string{}
	paths := []string{"a.txt", "b.txt", "dir/c.txt", "dir/d.txt", "e.txt"}
	for _, p := range paths[:3] {
		model[p] = mergemodel.Numbered(10, "init")
	}
	expect(t, publish.Committed)(f.Batch(func(b *Batch) error {
		for p, c := range model {
			if err := b.Write(p, []byte(c)); err != nil {
				return err
			}
		}
		return nil
	}))
	head := f.Base()
	actors := make([]*mergemodel.Actor, 4)
	for i := range actors {
		actors[i] = mergemodel.NewActor(head, model)
	}
	outcomes := map[publish.Status]int{}
	steps := 600
	if testing.Short() {
		steps = 150
	}
	for step := 0; step < steps; step++ {
		a := actors[r.Intn(len(actors))]
		if r.Intn(3) > 0 {
			a.Edit(r, paths)
			continue
		}
		want, conflict := a.Expect(model)
		res := publishPending(t, f, a)
		outcomes[res.Status]++
		if conflict != (res.Status == publish.Conflict) {
			t.Fatalf("step %d: gate said %s (paths %v), model expected conflict=%v", step, res.Status, res.Paths, conflict)
		}
		if !conflict {
			model = want
		}
		main, _ := st.FS("main")
		if err := mergemodel.Check(paths, model, main.Read); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		b, _ := st.Backend().Branch("main")
		a.Reset(b.Head, model)
	}
	t.Logf("outcomes: %v", outcomes)
	if outcomes[publish.Conflict] == 0 || outcomes[publish.Committed] == 0 {
		t.Errorf("the walk should see both commits and conflicts: %v", outcomes)
	}
}

// publishPending lands a's pending changes in one Batch from a's base.
func publishPending(t *testing.T, f *FS, a *mergemodel.Actor) *Result {
	t.Helper()
	res, err := f.Batch(func(b *Batch) error {
		for p, c := range a.Pending {
			if c == nil {
				if err := b.Delete(p); err != nil {
					return err
				}
				continue
			}
			if err := b.Write(p, []byte(*c)); err != nil {
				return err
			}
		}
		return nil
	}, Call{Base: a.Base})
	if err != nil {
		t.Fatal(err)
	}
	return res
}
