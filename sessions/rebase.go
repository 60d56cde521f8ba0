package sessions

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/internal/ovl"
	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/publish"
	"github.com/layerfs/layerfs/store"
)

// rebase moves a Workspace whose commit conflicted onto the head it met,
// keeping its pending changes: the upperdir stays, with files both sides
// changed rewritten — marker blocks where edits overlap, the merged text
// where they merged, head's version where .lww chose head — and files
// copied up without a change dropped, so head's newer versions show
// through. It returns the files that now hold markers. Callers hold w.mu.
func (w *workspace) rebase(res *publish.Result, c *publish.Capture) (markers []string, dropped []api.UncommittedPath, err error) {
	return w.rebaseOnto(res, c, rebaseMore{})
}

// rebaseMore is what a rebase does beyond a conflict's, when it moves a
// Workspace onto the Commit its own commit landed as (settleLanded).
type rebaseMore struct {
	// remove lists files the upperdir holds where the head's version is
	// the one to show: they go.
	remove []string
	// whiteouts lists paths the head holds and the view does not: each
	// gets a whiteout.
	whiteouts []string
	// landed: the Store's lease is on the head already (it landed with
	// the Commit), and stays there should the rebase fail, so that the
	// next start tries again.
	landed bool
}

// rebaseOnto is rebase, doing more too.
func (w *workspace) rebaseOnto(res *publish.Result, c *publish.Capture, more rebaseMore) (markers []string, dropped []api.UncommittedPath, err error) {
	// Commands a commit with allow_running left running would write into
	// the upperdir while it is rewritten, and keep the old overlay on it
	// while a new one is mounted there: they go first (a commit that
	// lands leaves them in the old view, whose upperdir it leaves alone).
	if w.holder != nil {
		w.d.reaper.killNow(w.holder.ns)
	}
	// A file copied up metadata only (a chmod, a rename) takes its data
	// from the lower layer, which the rebase replaces: copy its data up
	// now, through the view that still shows the old one (copyUpFile). So
	// too below the ignored paths, where a renamed directory, which takes
	// its lower entries from the path it was renamed from, is copied up
	// whole, and made opaque once the view is gone (as a carry does).
	view, err := w.writableView()
	if err != nil {
		return nil, nil, err
	}
	for _, p := range c.Metacopy {
		if err := copyUpFile(filepath.Join(view, filepath.FromSlash(p))); err != nil {
			return nil, nil, fmt.Errorf("copy up %s before the rebase: %w", p, err)
		}
	}
	settle := &carry{}
	scan := newKeptScan(w.upper(), w.keptSeen)
	for _, p := range c.Ignored {
		if err := w.copyUpUnder(p, scan, settle); err != nil {
			return nil, nil, fmt.Errorf("copy up %s before the rebase: %w", p, err)
		}
	}
	w.keptSeen = scan.next
	// A directory renamed from one the head no longer has would show
	// nothing of it there: it is copied up too.
	if err := w.copyUpOrphans(c, res.Head, settle); err != nil {
		return nil, nil, err
	}
	if err := unmount(w.hostPath()); err != nil {
		return nil, nil, err
	}
	// Failing from here (a full disk while marker blocks are written,
	// say), the Workspace must not be left without a view: every later
	// call would fail on it. It is shown again as it was, on its old
	// lease, the changes to its upperdir undone (rebaseLog), as a restart
	// after a crash here finds it (undoInterruptedRebase).
	oldLease, oldGen, oldUpper, shown := w.rec.Lease, w.rec.Gen, w.upper(), false
	var rl *rebaseLog
	defer func() {
		if err == nil || shown {
			return
		}
		if moved := w.dir("upper-" + fmt.Sprint(oldGen+1)); w.rec.Gen != oldGen {
			os.Rename(moved, oldUpper) // a no-op if it was not moved yet
		}
		w.rec.Lease, w.rec.Gen = oldLease, oldGen
		if !more.landed {
			w.d.s.SetLease(w.rec.ID, w.rec.Branch, w.d.id, w.rec.lease())
		}
		if rl != nil {
			if uerr := rl.undoFailed(oldUpper); uerr != nil {
				w.logf("a failed rebase could not be undone: its upperdir may hold the head's text: %v", uerr)
			}
		}
		// A work directory a volatile overlay used is refused again:
		// emptied (what it holds only frees space; a new one could not
		// be made on a full disk), it is taken as new.
		serr := emptyDir(w.work())
		if serr == nil {
			serr = w.show(nil)
		}
		if serr != nil {
			w.logf("the view could not be shown again after a failed rebase: %v", serr)
		}
	}()
	rl, markers, dropped, err = w.planRebase(res, c, settle.opaque, more)
	if err != nil {
		return nil, nil, err
	}
	if err := rl.apply(w.upper(), w.logf); err != nil {
		return nil, nil, err
	}
	if !more.landed {
		if err := w.d.s.SetLease(w.rec.ID, w.rec.Branch, w.d.id, res.Head); err != nil {
			return nil, nil, err
		}
	}
	oldWork := w.work()
	w.rec.Lease = res.Head.String()
	w.rec.Gen++
	if err := failpoint(FailpointRebaseRename); err != nil {
		return nil, nil, err
	}
	// The upperdir carries over; only the work directory is fresh. Once
	// renamed, it is the next generation's: a restart takes it up
	// (adoptMovedUpper), rather than undo the rebase.
	if err := os.Rename(w.dir("upper-"+fmt.Sprint(w.rec.Gen-1)), w.upper()); err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(w.work(), 0o755); err != nil {
		return nil, nil, err
	}
	if err := w.show(nil); err != nil {
		return nil, nil, err
	}
	shown = true
	w.unfollowed = object.Zero // on a head it leads to, if it was set
	removeInBackground(oldWork, rl.dir)
	// Shown: a record not saved is logged, as for a commit's switch
	// (switchOverlay); a restart takes up the moved upperdir.
	if err := w.rec.save(w.dir()); err != nil {
		w.logf("rebased onto %.12s, but its record could not be saved: %v", w.rec.Lease, err)
	}
	return markers, dropped, nil
}

// emptyDir removes everything in dir, keeping dir.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// planRebase writes the log of the changes rebase makes to the
// (unmounted) upperdir, in order: the new files, staged in the log's
// directory — marker blocks and merged text — go in first; then the
// files head's version replaces (.lww or more.remove) and those copied
// up without a change go, but in directories opaque lists, which rebase
// makes opaque last, and whose files stay; then the directories whose
// removal by the head stands (dropRemovedDirs). Every new file — and
// more.whiteouts's whiteouts — is written before the upperdir changes at
// all: a full disk stops the rebase with nothing to undo. It returns the
// log, saved, the files that will hold markers, and the uncommitted
// entries that go with the dropped directories.
func (w *workspace) planRebase(res *publish.Result, c *publish.Capture, opaque []string, more rebaseMore) (*rebaseLog, []string, []api.UncommittedPath, error) {
	rl, err := w.newRebaseLog(w.rec.Gen)
	if err != nil {
		return nil, nil, nil, err
	}
	upper := w.upper()
	made := map[string]bool{} // directories a step makes
	// put adds a step putting what stage writes at p.
	put := func(p string, stage func(full, staged string) error) error {
		for _, dir := range missingDirs(upper, p, made) {
			rl.add(rebaseStep{Op: stepMkdir, Path: dir})
		}
		full := filepath.Join(upper, filepath.FromSlash(p))
		var st unix.Stat_t
		err := lstatL(full, &st)
		i := rl.add(rebaseStep{Op: stepWrite, Path: p, Had: err == nil})
		return stage(full, rl.staged(i))
	}
	write := func(p string, data []byte) error {
		return put(p, func(full, staged string) error { return stageUpper(full, staged, p, data) })
	}
	var markers []string
	for _, pc := range res.Conflicts {
		if pc.Kind != publish.ConflictText || pc.Merge == nil {
			continue // binary, type, delete or mode: ours stays for the agent to settle
		}
		if err := write(pc.Path, []byte(strings.Join(pc.Merge.WithMarkers(res.Head.Short()), ""))); err != nil {
			return rl, nil, nil, err
		}
		markers = append(markers, pc.Path)
	}
	for _, m := range res.Merged {
		if err := write(m.Path, m.Content); err != nil {
			return rl, nil, nil, err
		}
	}
	for _, p := range more.whiteouts {
		if err := put(p, func(_, staged string) error { return stageWhiteout(staged, p) }); err != nil {
			return rl, nil, nil, err
		}
	}
	for _, d := range res.LWW {
		if d.Winner == "head" {
			rl.add(rebaseStep{Op: stepRemove, Path: d.Path})
		}
	}
	for _, p := range more.remove {
		rl.add(rebaseStep{Op: stepRemove, Path: p})
	}
	// Not in a directory about to be made opaque: nothing would show
	// through there.
	frozen := map[string]bool{}
	for _, dir := range opaque {
		frozen[filepath.ToSlash(dir)] = true
	}
	for _, p := range c.Unchanged {
		if !frozen[path.Dir(p)] {
			rl.add(rebaseStep{Op: stepRemove, Path: p})
		}
	}
	dropped, err := w.dropRemovedDirs(res, c, rl)
	if err != nil {
		return rl, nil, nil, err
	}
	for _, dir := range opaque {
		p := filepath.Join(upper, dir)
		redirect, rerr := getxattrL(p, ovl.Redirect)
		was, oerr := getxattrL(p, ovl.Opaque)
		if err := errors.Join(goneOK(rerr), goneOK(oerr)); err != nil {
			return rl, nil, nil, err
		}
		rl.add(rebaseStep{Op: stepOpaque, Path: filepath.ToSlash(dir), Redirect: redirect, Opaque: was})
	}
	return rl, markers, dropped, rl.save()
}

// missingDirs lists the directories of upperdir-relative p that upper
// lacks and made does not have yet, outermost first, and adds them to
// made.
func missingDirs(upper, p string, made map[string]bool) []string {
	var missing []string
	for dir := path.Dir(p); dir != "." && !made[dir]; dir = path.Dir(dir) {
		var st unix.Stat_t
		if err := lstatL(filepath.Join(upper, filepath.FromSlash(dir)), &st); err == nil {
			break
		}
		made[dir] = true
		missing = append(missing, dir)
	}
	slices.Reverse(missing)
	return missing
}

// stageUpper writes data to staged, on the upperdir's filesystem, for
// path, whose place in the upperdir is full: with the mode of the file
// it will replace (0644 for a whiteout or symlink); renamed in, it takes
// the place of what is there.
func stageUpper(full, staged, path string, data []byte) error {
	mode := os.FileMode(0o644)
	var st unix.Stat_t
	if err := lstatL(full, &st); err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
		mode = os.FileMode(st.Mode & 0o777)
	}
	err := os.WriteFile(staged, data, mode)
	if err == nil {
		err = os.Chmod(staged, mode) // whatever the umask
	}
	if err != nil {
		return fmt.Errorf("write %s into the upperdir: %w", path, err)
	}
	return nil
}

// stageWhiteout makes at staged an overlayfs whiteout (a 0/0 character
// device) for path.
func stageWhiteout(staged, path string) error {
	if err := unix.Mknod(staged, unix.S_IFCHR, 0); err != nil {
		return fmt.Errorf("make a whiteout for %s in the upperdir: %w", path, err)
	}
	return nil
}

// copyUpOrphans copies up through the view, whole, the renamed
// directories c captured whose source head has no directory at (another
// Workspace removed it), adding their directories to cr.opaque: on
// head's lower layer their redirects would find nothing.
func (w *workspace) copyUpOrphans(c *publish.Capture, head object.ID, cr *carry) error {
	tree, err := w.headTree(head)
	if err != nil {
		return err
	}
	for _, ch := range c.Changes.Changes {
		if ch.From == "" || ch.Entry == nil || ch.Entry.Type != store.TypeDir {
			continue
		}
		e, err := w.d.s.Lookup(tree, ch.From)
		if err == nil && e.Type == store.TypeDir {
			continue
		}
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err := w.copyUpRenamed(filepath.FromSlash(ch.Path), cr); err != nil {
			return fmt.Errorf("copy up %s before the rebase: %w", ch.Path, err)
		}
	}
	return nil
}

// dropRemovedDirs adds to rl the removal from the (unmounted) upperdir
// of the directories whose removal by the head stands
// (publish.Changeset.StaysRemoved: ours only touched their metadata, as
// a build making an ignored file in one does), and what they hold: on
// the head's lower layer they would be new directories, and the next
// commit would bring them back. It returns the uncommitted entries that
// go with them (ignored paths, special files).
func (w *workspace) dropRemovedDirs(res *publish.Result, c *publish.Capture, rl *rebaseLog) ([]api.UncommittedPath, error) {
	base, err := w.headTree(c.Changes.Base)
	if err != nil {
		return nil, err
	}
	head, err := w.headTree(res.Head)
	if err != nil {
		return nil, err
	}
	// lookup finds p in tree, nil where it is not; ok is false where the
	// lookup failed otherwise, and nothing is removed for it.
	lookup := func(tree object.ID, p string) (e *store.Entry, ok bool) {
		got, err := w.d.s.Lookup(tree, p)
		if err == nil {
			return &got, true
		}
		return nil, errors.Is(err, store.ErrNotFound)
	}
	uncommittedPaths := uncommitted(c)
	var dropped []api.UncommittedPath
	for i := range c.Changes.Changes {
		ch := &c.Changes.Changes[i]
		if ch.Entry == nil || ch.Entry.Type != store.TypeDir {
			continue // only a directory's can stand removed: no lookups
		}
		be, okBase := lookup(base, ch.Path)
		he, okHead := lookup(head, ch.Path)
		if !okBase || !okHead || !c.Changes.StaysRemoved(ch, be, he) {
			continue
		}
		rl.add(rebaseStep{Op: stepRemove, Path: ch.Path})
		// Its parents the head removed too, copied up only to hold it
		// (their metadata unchanged), go once empty.
		for dir := path.Dir(ch.Path); dir != "."; dir = path.Dir(dir) {
			be, okBase := lookup(base, dir)
			he, okHead := lookup(head, dir)
			if !okBase || !okHead || be == nil || he != nil {
				break
			}
			rl.add(rebaseStep{Op: stepRemoveEmpty, Path: dir})
		}
		for _, u := range uncommittedPaths {
			if strings.HasPrefix(u.Path, ch.Path+"/") && !slices.Contains(dropped, u) {
				dropped = append(dropped, u)
			}
		}
	}
	return dropped, nil
}
