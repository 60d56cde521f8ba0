package integration

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"

	"github.com/layerfs/layerfs"
	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/publish"
	"github.com/layerfs/layerfs/sessions"
)

// modelActor edits from its own base: a Workspace (ws set) or a file-call
// handle with an explicit base.
type modelActor struct {
	ws      string
	base    object.ID
	seen    map[string]string
	pending map[string]*string // nil deletes
}

var modelPaths = []string{"a.txt", "b.txt", "dir/c.txt", "dir/d.txt", "e.txt"}

// TestWorkspacesAndFileCallsMatchModel: two Workspaces and two file-call
// actors edit concurrently; every publish goes through the gate, and after
// each the branch equals an in-memory reference of the merge rules.
func TestWorkspacesAndFileCallsMatchModel(t *testing.T) {
	init := map[string]string{}
	for _, p := range modelPaths[:3] {
		init[p] = numberedLines(8, "init")
	}
	d := startDaemon(t, init, sessions.Config{})
	model := copyStrings(init)
	r := rand.New(rand.NewSource(5))
	head := func() object.ID { b, _ := d.st.Backend().Branch("main"); return b.Head }
	var actors []*modelActor
	for i := 0; i < 4; i++ {
		a := &modelActor{base: head(), seen: copyStrings(model), pending: map[string]*string{}}
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
		want, conflict := modelExpect(a, model)
		status := a.publish(t, d, main)
		outcomes[status]++
		if conflict != (status == api.StatusConflict) {
			t.Fatalf("step %d: gate said %s, the model expected conflict=%v", step, status, conflict)
		}
		if !conflict {
			model = want
		}
		if a.ws != "" && conflict {
			if _, err := d.Discard(a.ws); err != nil {
				t.Fatal(err)
			}
		}
		checkModel(t, d, model, step)
		a.base, a.seen, a.pending = head(), copyStrings(model), map[string]*string{}
	}
	t.Logf("outcomes: %v", outcomes)
	if outcomes[api.StatusConflict] == 0 || outcomes[api.StatusCommitted] == 0 {
		t.Errorf("the walk should see commits and conflicts: %v", outcomes)
	}
}

func numberedLines(n int, tag string) string {
	var sb strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&sb, "%s %d\n", tag, i)
	}
	return sb.String()
}

func copyStrings(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// edit changes one line of a file, creates one, or deletes one; a
// Workspace actor makes the change in its Workspace at once.
func (a *modelActor) edit(t *testing.T, d *testDaemon, r *rand.Rand) {
	p := modelPaths[r.Intn(len(modelPaths))]
	cur, ok := a.seen[p]
	if pc, pending := a.pending[p]; pending {
		cur, ok = "", pc != nil
		if pc != nil {
			cur = *pc
		}
	}
	var next *string
	switch {
	case !ok:
		c := numberedLines(1+r.Intn(4), fmt.Sprintf("new%d", r.Intn(1000)))
		next = &c
	case r.Intn(8) == 0:
		if _, atBase := a.seen[p]; !atBase {
			delete(a.pending, p)
			if a.ws != "" {
				d.sh(t, a.ws, "rm -f "+p)
			}
			return
		}
	default:
		lines := publish.SplitLines([]byte(cur))
		if len(lines) == 0 {
			lines = []string{"x\n"}
		}
		lines[r.Intn(len(lines))] = fmt.Sprintf("edit %d\n", r.Intn(100000))
		c := strings.Join(lines, "")
		next = &c
	}
	a.pending[p] = next
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

// modelExpect applies the reference rules to a's pending changes.
func modelExpect(a *modelActor, head map[string]string) (map[string]string, bool) {
	out := copyStrings(head)
	for p, oursC := range a.pending {
		baseC, inBase := a.seen[p]
		headC, inHead := head[p]
		ours, inOurs := "", oursC != nil
		if inOurs {
			ours = *oursC
		}
		switch {
		case inBase == inHead && baseC == headC:
		case inOurs == inHead && ours == headC:
		case !inOurs || !inHead:
			return nil, true
		default:
			m := publish.Merge3(publish.SplitLines([]byte(baseC)), publish.SplitLines([]byte(ours)), publish.SplitLines([]byte(headC)))
			if !m.Clean() {
				return nil, true
			}
			ours = strings.Join(m.Lines, "")
		}
		if inOurs {
			out[p] = ours
		} else {
			delete(out, p)
		}
	}
	return out, false
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
		for p, c := range a.pending {
			if c == nil {
				if err := b.Delete(p); err != nil {
					return err
				}
			} else if err := b.Write(p, []byte(*c)); err != nil {
				return err
			}
		}
		return nil
	}, layerfs.Call{Base: a.base})
	if err != nil {
		t.Fatal(err)
	}
	return res.Status.String()
}

func checkModel(t *testing.T, d *testDaemon, model map[string]string, step int) {
	t.Helper()
	f, _ := d.st.FS("main")
	var got, want []string
	for _, p := range modelPaths {
		if data, err := f.Read(p); err == nil {
			got = append(got, p+"="+string(data))
		}
	}
	for p, c := range model {
		want = append(want, p+"="+c)
	}
	sort.Strings(want)
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("step %d: the branch differs from the model\n got %q\nwant %q", step, got, want)
	}
}
