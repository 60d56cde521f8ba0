package sessions

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/extents"
	"github.com/layerfs/layerfs/internal/longpath"
	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/publish"
	"github.com/layerfs/layerfs/store"
)

// finishLanded does, after a restart, what a commit that landed as
// commit had still to do when the Workspace did not follow it: a crash
// came between the landing and the save of the record, or the switch to
// the new view failed, and the running daemon went on with the old view,
// its changes shown as pending (follow, backOut). Restored as it was, the
// Workspace would show the landed changes as pending again, and commit
// them twice: an append landed twice is a duplicated line. So it moves
// onto commit, whose Lease the Store holds already.
//
// If its upperdir holds nothing commit lacks — the usual case after a
// crash — it follows commit as a commit does, with an empty upperdir,
// keeping what a commit leaves out (ignored paths, special files).
// Otherwise commands wrote after the commit's capture — after a failed
// switch, or still running through the commit (allow_running) — and the
// upperdir moves onto commit as a conflict's rebase moves it onto the
// head (settleLanded): what differs from commit stays pending, the rest
// shows commit's version. Dropping the upperdir would lose those writes.
// It returns what the merge of what was written since reported (nil if
// nothing needed one), and the files that now hold marker blocks: a
// commit stops there, as at a conflict. The running daemon does the
// same before a commit, a discard or an end (catchUp). Callers hold
// w.mu, and the view of the record's lease is shown.
func (w *workspace) finishLanded(commit object.ID) (*publish.Result, []string, error) {
	since, err := w.writtenSince(commit)
	if err != nil {
		return nil, nil, fmt.Errorf("its commit %s landed, but: %w", commit.Short(), err)
	}
	if since == nil {
		cr, err := w.prepareDiscardCarry()
		if err != nil {
			return nil, nil, err
		}
		w.logf("its commit %.12s landed, but it had not followed it (a crash, or a switch that failed); following it", commit)
		// As the commit that landed does (it was checked, or forced): a
		// record saved before it, as a crash leaves it, still lists the
		// conflicts it settled.
		w.rec.Unsettled = nil                                 // saved with the switch
		return nil, nil, w.follow(commit, nil, true, nil, cr) // the Store's lease is on it already
	}
	return w.settleLanded(commit, since)
}

// pendingLanded lists what is pending against commit, the Commit the
// Workspace's last commit landed as and it has not followed
// (unfollowed): what the move onto it (catchUp) would leave pending —
// what differs from commit, and what commit put there that the view no
// longer shows — found without moving the upperdir. A path another
// commit changed too before the landing counts if the merge catchUp
// would make of it is not commit's version. Callers hold w.mu (read).
func (w *workspace) pendingLanded(commit object.ID) ([]string, error) {
	rest, err := w.writtenSince(commit)
	if rest == nil || err != nil {
		return nil, err
	}
	_, remove, err := w.mergeLanded(commit, rest)
	if err != nil {
		return nil, err
	}
	tree, err := w.headTree(commit)
	if err != nil {
		return nil, err
	}
	out := slices.Clone(rest.whiteouts)
	for _, ch := range rest.c.Changes.Changes {
		landed, err := publish.LookupEntry(w.d.s, tree, ch.Path)
		if err != nil {
			return nil, err
		}
		if !sameVersion(ch.Entry, landed) && !slices.Contains(remove, ch.Path) {
			out = append(out, ch.Path)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// landedRest is what a Workspace's upperdir holds that the Commit its
// own commit landed as does not (writtenSince).
type landedRest struct {
	// c is the upperdir's capture against the Workspace's lease (dry).
	c *publish.Capture
	// differ counts the changes whose version the Commit lacks.
	differ int
	// merge lists those of them at paths another commit changed between
	// the lease and the one the Workspace's landed on: there the landed
	// version is a merge, which the Workspace's version must be merged
	// with again. Their content is in stage.
	merge []publish.Change
	stage *store.Stage
	// whiteouts lists paths the landed commit put there and the view no
	// longer shows (removed since), topmost first.
	whiteouts []string
}

// writtenSince compares the upperdir, as the view of the record's lease
// shows it, with commit, a commit of the Workspace's that landed: nil if
// commit holds all of it. A path holds the same version if it has the
// same type, mode and content (a publish.Fingerprint: mtime and owner
// aside, as the gate compares them); a directory, the same type and mode,
// its entries being compared one by one.
func (w *workspace) writtenSince(commit object.ID) (*landedRest, error) {
	rules, err := w.ignoreRules()
	if err != nil {
		return nil, err
	}
	c, err := publish.CaptureUpperDry(w.d.s, w.captured(rules))
	if err != nil {
		return nil, err
	}
	cc, err := w.d.s.Commit(commit)
	if err != nil {
		return nil, err
	}
	lease := w.rec.lease()
	parent := lease // what the commit landed on
	if len(cc.Parents) > 0 {
		parent = cc.Parents[0]
	}
	var trees [2]object.ID // the lease's, the parent's
	for i, id := range []object.ID{lease, parent} {
		if trees[i], err = w.headTree(id); err != nil {
			return nil, err
		}
	}
	rest := &landedRest{c: c}
	for _, ch := range c.Changes.Changes {
		landed, err := publish.LookupEntry(w.d.s, cc.Tree, ch.Path)
		if err != nil {
			return nil, err
		}
		if sameVersion(ch.Entry, landed) {
			continue
		}
		rest.differ++
		if ch.Entry != nil && ch.Entry.Type == store.TypeDir {
			continue // its own metadata: nothing to merge
		}
		was, err := publish.LookupEntry(w.d.s, trees[0], ch.Path)
		if err != nil {
			return nil, err
		}
		met, err := publish.LookupEntry(w.d.s, trees[1], ch.Path)
		if err != nil {
			return nil, err
		}
		if !sameVersion(was, met) {
			rest.merge = append(rest.merge, ch)
		}
	}
	if rest.whiteouts, err = w.vanished(trees[1], cc.Tree); err != nil {
		return nil, err
	}
	if rest.differ == 0 && len(rest.whiteouts) == 0 {
		return nil, nil
	}
	return rest, nil
}

// sameVersion reports whether a and b (nil: none) hold the same version
// of a path: type, mode and content or target; for directories, type
// and mode.
func sameVersion(a, b *store.Entry) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Type != b.Type || a.Mode != b.Mode {
		return false
	}
	switch a.Type {
	case store.TypeDir:
		return true
	case store.TypeSymlink:
		return a.Target == b.Target
	}
	return a.ID == b.ID && a.Size == b.Size
}

// vanished lists the paths that the changes from tree parent to tree
// landed put there and the Workspace's view no longer shows: removed
// since the capture. Of a directory's entries, only the topmost path the
// view lacks is listed; nothing is, below a path the view shows as
// other than a directory.
func (w *workspace) vanished(parent, landed object.ID) ([]string, error) {
	diffs, err := publish.DiffTrees(w.d.s, parent, landed)
	if err != nil {
		return nil, err
	}
	view := w.hostPath()
	dirs := map[string]bool{} // seen in the view as directories
	listed := map[string]bool{}
	var out []string
	for _, d := range diffs {
		if d.New == nil {
			continue
		}
		missing, err := topMissing(view, d.Path, dirs)
		if err != nil {
			return nil, err
		}
		if missing != "" && !listed[missing] {
			listed[missing] = true
			out = append(out, missing)
		}
	}
	return out, nil
}

// topMissing returns the first of p's directories, or p itself, that the
// view at root lacks, or "" if it shows p, or one of p's directories as
// other than a directory (which hides the rest). Each is looked at
// without following a symlink; dirs remembers those seen as directories.
func topMissing(root, p string, dirs map[string]bool) (string, error) {
	parts := strings.Split(p, "/")
	for i := range parts {
		q := strings.Join(parts[:i+1], "/")
		last := i == len(parts)-1
		if !last && dirs[q] {
			continue
		}
		var st unix.Stat_t
		err := lstatL(filepath.Join(root, filepath.FromSlash(q)), &st) // longer than PATH_MAX with root in front, maybe
		switch {
		case errors.Is(err, unix.ENOENT):
			return q, nil
		case err != nil:
			return "", fmt.Errorf("look at %s in the view: %w", q, err)
		case last:
			return "", nil
		case st.Mode&unix.S_IFMT != unix.S_IFDIR:
			return "", nil
		}
		dirs[q] = true
	}
	return "", nil
}

// settleLanded moves the Workspace onto commit, a commit of its own that
// landed, keeping its upperdir (rebaseOnto): what differs from commit
// stays pending. The paths another commit changed too before the landing
// are merged with commit's version (mergeLanded), with marker blocks
// where edits overlap; the paths removed since the capture get
// whiteouts. It returns the merge's result and the files that hold
// markers. Callers hold w.mu.
func (w *workspace) settleLanded(commit object.ID, rest *landedRest) (*publish.Result, []string, error) {
	res, remove, err := w.mergeLanded(commit, rest)
	if err != nil {
		return nil, nil, fmt.Errorf("its commit %s landed, but merge what was written since: %w", commit.Short(), err)
	}
	// The rebase renames the upperdir to the next generation's: resume
	// made those directories, empty (a running daemon's catchUp removed
	// them).
	nextUpper, nextWork := w.genDirs(w.rec.Gen + 1)
	if err := errors.Join(os.RemoveAll(nextWork), goneOK(os.Remove(nextUpper))); err != nil {
		return nil, nil, err
	}
	prevUnsettled, prevCommits := w.rec.Unsettled, w.rec.Commits
	w.rec.Unsettled = unsettledBy(res, rest.c) // saved by the rebase
	w.rec.Commits++                            // the landed commit, followed now
	markers, dropped, err := w.rebaseOnto(res, rest.c, rebaseMore{remove: remove, whiteouts: rest.whiteouts, landed: true})
	if err != nil {
		w.rec.Unsettled, w.rec.Commits = prevUnsettled, prevCommits
		return nil, nil, fmt.Errorf("its commit %s landed, but move what was written since onto it: %w", commit.Short(), err)
	}
	w.logf("its commit %.12s landed, but it had not followed it (a crash, or a switch that failed), and commands wrote since: now on it, with what they wrote pending", commit)
	if len(markers) > 0 {
		w.logf("written since its commit and changed by another meanwhile, these hold conflict markers: %s", strings.Join(markers, ", "))
	}
	for _, u := range w.rec.Unsettled {
		w.logf("written since its commit and changed by another meanwhile, %s holds this Workspace's version (%s conflict)", u.Path, u.Kind)
	}
	for _, u := range dropped {
		w.logf("not keeping %s: its directory is gone in %.12s", u.Path, commit)
	}
	return res, markers, nil
}

// mergeLanded runs the gate on rest.merge, the changes at paths another
// commit changed before the Workspace's landed on top of it (so commit's
// version there is a merge), against commit, as the Workspace's lease
// their base: the merge of what was written since. Where that gives
// commit's version, nothing was, and the file is listed in remove, for
// commit's to show. A Workspace that is on the lease it landed on has
// no such paths, and res only names commit.
func (w *workspace) mergeLanded(commit object.ID, rest *landedRest) (res *publish.Result, remove []string, err error) {
	if len(rest.merge) == 0 {
		return &publish.Result{Head: commit}, nil, nil
	}
	stage := w.d.s.NewStage()
	changes := make([]publish.Change, len(rest.merge))
	for i, ch := range rest.merge {
		if changes[i], err = w.withContent(ch, stage); err != nil {
			return nil, nil, err
		}
	}
	res, err = publish.Preview(w.d.s, &publish.Changeset{Base: w.rec.lease(), Changes: changes}, stage, commit)
	if err != nil {
		return nil, nil, err
	}
	tree, err := w.headTree(commit)
	if err != nil {
		return nil, nil, err
	}
	merged := res.Merged[:0]
	for _, m := range res.Merged {
		landed, err := publish.LookupEntry(w.d.s, tree, m.Path)
		if err != nil {
			return nil, nil, err
		}
		if sameVersion(m.Entry, landed) {
			remove = append(remove, m.Path)
		} else {
			merged = append(merged, m)
		}
	}
	res.Merged = merged
	return res, remove, nil
}

// withContent returns ch, a file's change from a dry capture, with its
// content, read through the view, in stage: the gate reads it to merge.
func (w *workspace) withContent(ch publish.Change, stage *store.Stage) (publish.Change, error) {
	if ch.Entry == nil || ch.Entry.Type != store.TypeFile {
		return ch, nil
	}
	f, err := longpath.Open(filepath.Join(w.hostPath(), filepath.FromSlash(ch.Path)), os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return ch, err
	}
	defer f.Close()
	content, err := extents.Write(stage, f)
	if err != nil {
		return ch, fmt.Errorf("read %s: %w", ch.Path, err)
	}
	e := *ch.Entry
	e.ID, e.Size = content.ID, content.Size
	ch.Entry = &e
	return ch, nil
}

// catchUp moves the Workspace onto the Commit its last commit landed as,
// if the switch to that Commit's view failed and it went on with the
// old view (unfollowed), as a restart would (finishLanded): a commit, a
// discard, and an end that does not discard call it first. That
// Commit's changes are then no longer pending, and what commands wrote
// since is, on it. A commit from the old lease took that Commit's
// changes for its own again, and met its own lines as another's: a line
// appended after such a commit, to a file it changed, came back between
// marker blocks beside the commit's own line. If what was written since
// must be merged with what another commit changed before that Commit
// landed, and that leaves marker blocks or unsettled paths, it returns
// the conflict for the commit to report (and not go on); nil otherwise.
// Moving the upperdir (settleLanded) ends the commands still running, as
// a conflict's rebase does. Callers hold w.mu.
func (w *workspace) catchUp() (*api.CommitResult, error) {
	commit := w.unfollowed
	if commit.IsZero() {
		return nil, nil
	}
	if nv := w.takeNext(); nv != nil {
		nv.discard(w) // made for the old lease; the next generation is the move's
	}
	res, markers, err := w.finishLanded(commit) // clears unfollowed once on it
	if err != nil {
		return nil, fmt.Errorf("move onto %s, which its last commit landed as: %w", commit.Short(), err)
	}
	if len(markers) == 0 && len(w.rec.Unsettled) == 0 {
		return nil, nil
	}
	out := &api.CommitResult{Status: api.StatusConflict, Head: commit.String(), Markers: markers}
	if res == nil { // followed it whole: what is unsettled was before
		for _, u := range w.rec.Unsettled {
			out.Paths = append(out.Paths, u.Path)
		}
		return out, nil
	}
	for _, pc := range res.Conflicts {
		out.Paths = append(out.Paths, pc.Path)
		out.Conflicts = append(out.Conflicts, api.PathConflict{Path: pc.Path, Kind: pc.Kind})
	}
	for _, m := range res.Merged {
		out.Merged = append(out.Merged, m.Path)
	}
	return out, nil
}
