package integration

import (
	"context"
	"maps"
	"math/rand"
	"testing"

	"github.com/layerfs/layerfs"
	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/internal/mergemodel"
	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/sessions"
)

// modelActor edits from its own base: a Workspace (ws set) or a file-call
// handle with an explicit base.
type modelActor struct {
	*mergemodel.Actor
	ws string
}

var modelPaths = []string{"a.txt", "b.txt", "dir/c.txt", "dir/d.txt", "e.txt"}

// TestWorkspacesAndFileCallsMatchModel: two Workspaces and two file-call
// actors edit concurrently; every publish goes through the gate, and after
// each the branch equals an in-memory reference of the merge rules.
func TestWorkspacesAndFileCallsMatchModel(t *testing.T) {
	init := map[string]string{}
	for _, p := range modelPaths[:3] {
		init[p] = mergemodel.Numbered(8, "init")
	}
	d := startDaemon(t, init, sessions.Config{})
	model := maps.Clone(init)
	r := rand.New(rand.NewSource(5))
	head := func() object.ID { b, _ := d.st.Backend().Branch("main"); return b.Head }
	var actors []*modelActor
	for i := 0; i < 4; i++ {
		a := &modelActor{Actor: mergemodel.NewActor(head(), model)}
		if i < 2 {
			a.ws = d.create(t, "main").ID
		}
		actors = append(actors, a)
	}
	main, err := d.st.FS("main")
	if err != nil {
		t.Fatal(err)
	}
	outcomes := map[string]int{}
	for step := 0; step < 150; step++ {
		a := actors[r.Intn(len(actors))]
		if r.Intn(3) > 0 {
			a.edit(t, d, r)
			continue
		}
		want, conflict := a.Expect(model)
		status := a.publish(t, d, main)
		outcomes[status]++
		if conflict != (status == api.StatusConflict) {
			t.Fatalf("step %d: gate said %s, the model expected conflict=%v", step, status, conflict)
		}
		if !conflict {
			model = want
		}
		if a.ws != "" && conflict {
			if _, err := d.Discard(a.ws, false); err != nil {
				t.Fatal(err)
			}
		}
		main, _ := d.st.FS("main")
		if err := mergemodel.Check(modelPaths, model, main.Read); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		a.Reset(head(), model)
	}
	t.Logf("outcomes: %v", outcomes)
	if outcomes[api.StatusConflict] == 0 || outcomes[api.StatusCommitted] == 0 {
		t.Errorf("the walk should see commits and conflicts: %v", outcomes)
	}
}

// edit changes one line of a file, creates one, or deletes one; a
// Workspace actor makes the change in its Workspace at once.
func (a *modelActor) edit(t *testing.T, d *testDaemon, r *rand.Rand) {
	p, next := a.Edit(r, modelPaths)
	if a.ws == "" {
		return
	}
	if next == nil {
		d.sh(t, a.ws, "rm -f "+p)
		return
	}
	res, err := d.Exec(context.Background(), a.ws, api.ExecRequest{
		Argv: []string{"sh", "-c", `mkdir -p "$(dirname "$1")" && cat > "$1"`, "sh", p}, Stdin: *next}, nil)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("write %s in %s: %v %+v", p, a.ws, err, res)
	}
}

func (a *modelActor) publish(t *testing.T, d *testDaemon, main *layerfs.FS) string {
	t.Helper()
	if a.ws != "" {
		res, err := d.Commit(a.ws, api.CommitRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return res.Status
	}
	res, err := main.Batch(func(b *layerfs.Batch) error {
		for p, c := range a.Pending {
			if c == nil {
				if err := b.Delete(p); err != nil {
					return err
				}
			} else if err := b.Write(p, []byte(*c)); err != nil {
				return err
			}
		}
		return nil
	}, layerfs.Call{Base: a.Base})
	if err != nil {
		t.Fatal(err)
	}
	return res.Status.String()
}
