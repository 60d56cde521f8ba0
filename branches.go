package layerfs

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/layerfs/layerfs/publish"
	"github.com/layerfs/layerfs/store"
)

// Merge folds branch from into branch into: a fast-forward when into is
// behind, nothing when from is already in into's history, otherwise a
// three-way merge through the gate with into's .lww rules. A Conflict
// writes nothing and names the paths.
func (st *Store) Merge(into, from string, call ...Call) (*Result, error) {
	c := callOf(call)
	if c.ID == "" {
		c.ID = newOperationID()
	}
	res, err := publish.MergeBranches(st.s, into, from, publish.Meta{Origin: store.OriginOperation + c.ID, Message: c.Message})
	if err != nil {
		return nil, fmt.Errorf("merge %s into %s: %w", from, into, err)
	}
	return res, nil
}

// Publish makes branch's head main's next Layer, merging through the gate
// when main moved since the branch left it.
func (st *Store) Publish(branch string, call ...Call) (*Result, error) {
	if branch == store.MainBranch {
		return nil, fmt.Errorf("publish main: it is main: %w", store.ErrBadName)
	}
	return st.Merge(store.MainBranch, branch, call...)
}

// Squash folds the run of main's Layers from..to into one Layer with the
// same final tree. Layers are named as refs are: "L7", "L000007" or "7".
func (st *Store) Squash(from, to string) (store.LayerRef, error) {
	f, err := layerSeq(from)
	if err != nil {
		return store.LayerRef{}, err
	}
	t, err := layerSeq(to)
	if err != nil {
		return store.LayerRef{}, err
	}
	return st.s.Squash(f, t)
}

func layerSeq(s string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimPrefix(s, "L"), 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("layer %q: want L<n> or a number: %w", s, store.ErrBadName)
	}
	return n, nil
}

// Layers lists main's manifest, newest first.
func (st *Store) Layers() ([]store.LayerRef, error) { return st.s.Layers() }
