package fusefs

import (
	"io"
	"log"
	"testing"

	"github.com/layerfs/layerfs/lowerfs"
	"github.com/layerfs/layerfs/store"
)

// TestForgottenCommitDropsItsView: when the kernel forgets a Commit's
// directory in an all-commits mount, the Commit's View goes too; the
// daemon's mount kept one for every Commit it had ever shown.
func TestForgottenCommitDropsItsView(t *testing.T) {
	s := store.NewTestStore(t)
	c := lowerfs.WriteTestCommit(t, s, sample(nil))
	fsys := newFileSystem(s, Options{AllCommits: true}, log.New(io.Discard, "", 0))
	defer fsys.close()
	v, err := fsys.view(c)
	if err != nil {
		t.Fatal(err)
	}
	newCommitDir(fsys, v).OnForget()
	if n := len(fsys.views); n != 0 {
		t.Errorf("%d Views kept after the Commit's directory was forgotten, want 0", n)
	}
}
