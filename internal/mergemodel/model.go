// Package mergemodel is the in-memory reference of the publish gate's
// merge rules that the model-based tests (file calls in the root package,
// Workspaces and file calls in integration/) check the gate against.
package mergemodel

import (
	"fmt"
	"maps"
	"math/rand"
	"sort"
	"strings"

	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/publish"
)

// Actor is one agent editing from its own base, as a Workspace does.
type Actor struct {
	Base    object.ID
	Seen    map[string]string  // the tree at Base
	Pending map[string]*string // new content; nil deletes
}

// NewActor starts an actor at base, whose tree is seen.
func NewActor(base object.ID, seen map[string]string) *Actor {
	a := &Actor{}
	a.Reset(base, seen)
	return a
}

// Reset moves the actor to base, with nothing pending.
func (a *Actor) Reset(base object.ID, seen map[string]string) {
	a.Base, a.Seen, a.Pending = base, maps.Clone(seen), map[string]*string{}
}

// Edit changes one line of one of paths, creates it, or deletes it, and
// returns the path and its new content (nil: the file is gone).
func (a *Actor) Edit(r *rand.Rand, paths []string) (string, *string) {
	p := paths[r.Intn(len(paths))]
	cur, ok := a.Seen[p]
	if pc, pending := a.Pending[p]; pending {
		cur, ok = "", pc != nil
		if pc != nil {
			cur = *pc
		}
	}
	var next *string
	switch {
	case !ok:
		c := Numbered(1+r.Intn(5), fmt.Sprintf("new%d", r.Intn(1000)))
		next = &c
	case r.Intn(8) == 0:
		if _, atBase := a.Seen[p]; !atBase {
			delete(a.Pending, p) // made and unmade before publishing
			return p, nil
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
	a.Pending[p] = next
	return p, next
}

// Expect applies the reference rules to the actor's pending changes
// against head: a path head left alone takes ours; the same change on both
// sides is fine; text changed on both sides merges line by line; anything
// else conflicts, and then nothing lands.
func (a *Actor) Expect(head map[string]string) (map[string]string, bool) {
	out := maps.Clone(head)
	for p, oursC := range a.Pending {
		baseC, inBase := a.Seen[p]
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

// Numbered is n lines "tag i".
func Numbered(n int, tag string) string {
	var sb strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&sb, "%s %d\n", tag, i)
	}
	return sb.String()
}

// Check compares the files at paths, as read gives them (an error: the
// file is missing), with model.
func Check(paths []string, model map[string]string, read func(path string) ([]byte, error)) error {
	var got, want []string
	for _, p := range paths {
		if data, err := read(p); err == nil {
			got = append(got, p+"="+string(data))
		}
	}
	for p, c := range model {
		want = append(want, p+"="+c)
	}
	sort.Strings(want)
	if strings.Join(got, "|") != strings.Join(want, "|") {
		return fmt.Errorf("the branch differs from the model\n got %q\nwant %q", got, want)
	}
	return nil
}
