package layerfs

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"

	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/publish"
)

// actor is one agent editing from its own base, as a Workspace does.
type actor struct {
	base    object.ID
	seen    map[string]string  // the tree at base
	pending map[string]*string // new content; nil deletes
}

// TestGateMatchesModel: random concurrent edits by several actors land
// through the gate; after every publish the branch equals an in-memory
// reference of the merge rules, and nothing accepted is ever lost.
func TestGateMatchesModel(t *testing.T) {
	st, f := newProject(t)
	r := rand.New(rand.NewSource(11))
	model := map[string]string{}
	paths := []string{"a.txt", "b.txt", "dir/c.txt", "dir/d.txt", "e.txt"}
	for _, p := range paths[:3] {
		model[p] = numbered(10, "init")
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
	actors := make([]*actor, 4)
	for i := range actors {
		actors[i] = &actor{base: head, seen: copyMap(model), pending: map[string]*string{}}
	}
	outcomes := map[publish.Status]int{}
	steps := 600
	if testing.Short() {
		steps = 150
	}
	for step := 0; step < steps; step++ {
		a := actors[r.Intn(len(actors))]
		if r.Intn(3) > 0 {
			a.edit(r, paths)
			continue
		}
		want, conflict := expected(a, model)
		res := a.publish(t, f)
		outcomes[res.Status]++
		if conflict != (res.Status == publish.Conflict) {
			t.Fatalf("step %d: gate said %s (paths %v), model expected conflict=%v", step, res.Status, res.Paths, conflict)
		}
		if !conflict {
			model = want
		}
		checkBranch(t, st, model, step)
		b, _ := st.Backend().Branch("main")
		a.base, a.seen, a.pending = b.Head, copyMap(model), map[string]*string{}
	}
	t.Logf("outcomes: %v", outcomes)
	if outcomes[publish.Conflict] == 0 || outcomes[publish.Committed] == 0 {
		t.Errorf("the walk should see both commits and conflicts: %v", outcomes)
	}
}

func numbered(n int, tag string) string {
	var sb strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&sb, "%s %d\n", tag, i)
	}
	return sb.String()
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// edit changes one line of a file, creates one, or deletes one.
func (a *actor) edit(r *rand.Rand, paths []string) {
	p := paths[r.Intn(len(paths))]
	cur, ok := a.seen[p]
	if pc, pending := a.pending[p]; pending {
		cur, ok = "", pc != nil
		if pc != nil {
			cur = *pc
		}
	}
	switch {
	case !ok:
		c := numbered(1+r.Intn(5), fmt.Sprintf("new%d", r.Intn(1000)))
		a.pending[p] = &c
	case r.Intn(8) == 0:
		if _, atBase := a.seen[p]; !atBase {
			delete(a.pending, p) // made and unmade before publishing
			return
		}
		a.pending[p] = nil
	default:
		lines := publish.SplitLines([]byte(cur))
		if len(lines) == 0 {
			lines = []string{"x\n"}
		}
		lines[r.Intn(len(lines))] = fmt.Sprintf("edit %d\n", r.Intn(100000))
		c := strings.Join(lines, "")
		a.pending[p] = &c
	}
}

// expected applies the reference rules: a path head left alone takes ours;
// the same change on both sides is fine; text changed on both sides merges
// line by line; anything else conflicts, and then nothing lands.
func expected(a *actor, head map[string]string) (map[string]string, bool) {
	out := copyMap(head)
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
			return nil, true // delete against a change
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

func (a *actor) publish(t *testing.T, f *FS) *Result {
	t.Helper()
	res, err := f.Batch(func(b *Batch) error {
		for p, c := range a.pending {
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
	}, Call{Base: a.base})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// checkBranch compares main's files with the model.
func checkBranch(t *testing.T, st *Store, model map[string]string, step int) {
	t.Helper()
	f, _ := st.FS("main")
	var got []string
	for _, p := range []string{"a.txt", "b.txt", "dir/c.txt", "dir/d.txt", "e.txt"} {
		if data, err := f.Read(p); err == nil {
			got = append(got, p+"="+string(data))
		}
	}
	var want []string
	for p, c := range model {
		want = append(want, p+"="+c)
	}
	sort.Strings(want)
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("step %d: branch differs from the model\n got %q\nwant %q", step, got, want)
	}
}
