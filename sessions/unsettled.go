package sessions

import (
	"errors"
	"fmt"
	"strings"

	"github.com/layerfs/layerfs/publish"
)

// ErrUnsettled: a commit of a path that a conflict left holding this
// Workspace's version, unchanged since. A text conflict leaves marker
// blocks, which the gate refuses until they are resolved; a binary, type,
// delete or mode conflict has no markers to leave, so the Workspace
// remembers what it held there instead, and refuses the same version
// again: committed as it is, it would silently replace the head's.
var ErrUnsettled = errors.New("conflict not settled")

// unsettledPath is a path a conflict left as this Workspace had it: Kind
// is the conflict's kind, Head the head it met (short id), and Ours what
// the Workspace held there (see versionOf).
type unsettledPath struct {
	Path string `json:"path"`
	Kind string `json:"kind"`
	Head string `json:"head"`
	Ours string `json:"ours"`
}

// versionOf names the version a change puts at its path, its mtime and
// owner aside: a touch does not settle a conflict, a new content, type or
// mode does. A directory is named by its type alone.
func versionOf(c *publish.Change) string {
	e := c.Entry
	switch {
	case e == nil:
		return "deleted"
	case e.ID.IsZero() && e.Target == "":
		return fmt.Sprintf("%v %o", e.Type, e.Mode)
	}
	return fmt.Sprintf("%v %o %s %q", e.Type, e.Mode, e.ID, e.Target)
}

// unsettledBy lists the conflicts of a commit that left no markers, with
// the version the Workspace held at each.
func unsettledBy(res *publish.Result, c *publish.Capture) []unsettledPath {
	ours := changesByPath(c.Changes)
	var out []unsettledPath
	for _, pc := range res.Conflicts {
		if pc.Kind == publish.ConflictText && pc.Merge != nil {
			continue // marker blocks, which the gate checks
		}
		ch, ok := ours[pc.Path]
		if !ok {
			continue // a conflict below a path this Workspace changed
		}
		out = append(out, unsettledPath{Path: pc.Path, Kind: pc.Kind, Head: res.Head.Short(), Ours: versionOf(ch)})
	}
	return out
}

// checkSettled refuses a commit that would publish a path still holding
// the version its last conflict left there. A path no longer changed, or
// changed to another version, is settled.
func checkSettled(unsettled []unsettledPath, cs *publish.Changeset) error {
	if len(unsettled) == 0 {
		return nil // every commit but those after a conflict: no map to build
	}
	changes := changesByPath(cs)
	var bad []string
	for _, u := range unsettled {
		if ch, ok := changes[u.Path]; ok && versionOf(ch) == u.Ours {
			bad = append(bad, fmt.Sprintf("%s (%s conflict with head %s)", u.Path, u.Kind, u.Head))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s still holds this Workspace's version, which would replace the head's: "+
		"write the version to keep (or restore the head's), or commit with force (ws commit --force, \"force\": true)",
		ErrUnsettled, strings.Join(bad, ", "))
}

func changesByPath(cs *publish.Changeset) map[string]*publish.Change {
	m := make(map[string]*publish.Change, len(cs.Changes))
	for i := range cs.Changes {
		m[cs.Changes[i].Path] = &cs.Changes[i]
	}
	return m
}
