package sessions

import (
	"fmt"
	"slices"
	"testing"

	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/publish"
	"github.com/layerfs/layerfs/store"
)

// TestHotPaths: a Commit's big files are remembered (not its small files,
// directories or deletes), at most hotPerCommit of them, for the last
// hotCommits Commits.
func TestHotPaths(t *testing.T) {
	commit := func(i int) object.ID { return object.Sum(object.KindCommit, []byte(fmt.Sprint("commit", i))) }
	var h hotPaths
	cs := &publish.Changeset{Changes: []publish.Change{
		{Path: "big", Entry: &store.Entry{Type: store.TypeFile, Size: warmMin}},
		{Path: "small", Entry: &store.Entry{Type: store.TypeFile, Size: warmMin - 1}},
		{Path: "dir", Entry: &store.Entry{Type: store.TypeDir, Size: warmMin}},
		{Path: "gone"},
		{Path: "d/big2", Entry: &store.Entry{Type: store.TypeFile, Size: 1 << 30}},
	}}
	h.add(commit(0), cs)
	if got, want := h.of(commit(0)), []string{"big", "d/big2"}; !slices.Equal(got, want) {
		t.Fatalf("remembered %q, want %q", got, want)
	}
	if got := h.of(commit(1)); got != nil {
		t.Fatalf("an unknown Commit has hot paths %q", got)
	}

	many := &publish.Changeset{}
	for i := range 2 * hotPerCommit {
		many.Changes = append(many.Changes, publish.Change{Path: fmt.Sprint("f", i), Entry: &store.Entry{Type: store.TypeFile, Size: warmMin}})
	}
	for i := 1; i <= hotCommits; i++ {
		h.add(commit(i), many)
	}
	if got := h.of(commit(0)); got != nil {
		t.Fatalf("the oldest Commit is still remembered after %d more: %q", hotCommits, got)
	}
	if got := len(h.of(commit(hotCommits))); got != hotPerCommit {
		t.Fatalf("remembered %d paths of one Commit, want at most %d", got, hotPerCommit)
	}
	if len(h.paths) != hotCommits || len(h.order) != hotCommits {
		t.Fatalf("remembering %d Commits (%d in order), want %d", len(h.paths), len(h.order), hotCommits)
	}
	h.add(commit(99), &publish.Changeset{Changes: cs.Changes[1:2]})
	if _, ok := h.paths[commit(99)]; ok {
		t.Fatal("a Commit with no big file takes a place")
	}
}
