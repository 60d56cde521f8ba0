package sessions

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/layerfs/layerfs/api"
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
	for _, p := range c.Metacopy {
		if err := copyUpFile(filepath.Join(w.hostPath(), filepath.FromSlash(p))); err != nil {
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
	// call would fail on it. It is shown again as it stands, on its old
	// lease, with what the rebase rewrote so far.
	oldLease, oldGen, oldUpper, shown := w.rec.Lease, w.rec.Gen, w.upper(), false
	defer func() {
		if err == nil || shown {
			return
		}
		if moved := w.dir("upper-" + fmt.Sprint(oldGen+1)); w.rec.Gen != oldGen {
			os.Rename(moved, oldUpper) // a no-op if it was not moved yet
		}
		w.rec.Lease, w.rec.Gen = oldLease, oldGen
		w.d.s.SetLease(w.rec.ID, w.rec.Branch, w.d.id, w.rec.lease())
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
	markers, err = w.rewriteUpper(res, c, settle.opaque)
	if err != nil {
		return nil, nil, err
	}
	if dropped, err = w.dropRemovedDirs(res, c); err != nil {
		return nil, nil, err
	}
	settle.settleOpaque(w.upper(), w.logf)
	if err := w.d.s.SetLease(w.rec.ID, w.rec.Branch, w.d.id, res.Head); err != nil {
		return nil, nil, err
	}
	oldWork := w.work()
	w.rec.Lease = res.Head.String()
	w.rec.Gen++
	// The upperdir carries over; only the work directory is fresh.
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
	removeInBackground(oldWork)
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

// rewriteUpper edits the (unmounted) upperdir as rebase describes; opaque
// lists the directories rebase makes opaque, whose files copied up
// without a change stay. The new files are all written first, in the work
// directory, and renamed in only once every one is whole: a full disk
// stops it before the upperdir changes at all.
func (w *workspace) rewriteUpper(res *publish.Result, c *publish.Capture, opaque []string) ([]string, error) {
	upper := w.upper()
	var markers []string
	var staged []stagedFile
	defer func() {
		for _, f := range staged {
			os.Remove(f.tmp) // those not renamed in
		}
	}()
	stage := func(p string, data []byte) error {
		f, err := stageUpper(upper, w.work(), p, data)
		if err != nil {
			return err
		}
		staged = append(staged, f)
		return nil
	}
	for _, pc := range res.Conflicts {
		if pc.Kind != publish.ConflictText || pc.Merge == nil {
			continue // binary, type, delete or mode: ours stays for the agent to settle
		}
		if err := stage(pc.Path, []byte(strings.Join(pc.Merge.WithMarkers(res.Head.Short()), ""))); err != nil {
			return nil, err
		}
		markers = append(markers, pc.Path)
	}
	for _, m := range res.Merged {
		if err := stage(m.Path, m.Content); err != nil {
			return nil, err
		}
	}
	for len(staged) > 0 {
		f := staged[0]
		if err := os.MkdirAll(filepath.Dir(f.full), 0o755); err != nil {
			return nil, err
		}
		if err := os.Rename(f.tmp, f.full); err != nil {
			return nil, fmt.Errorf("write %s into the upperdir: %w", f.path, err)
		}
		staged = staged[1:]
	}
	for _, d := range res.LWW {
		if d.Winner == "head" {
			if err := removeUpper(upper, d.Path); err != nil {
				return nil, err
			}
		}
	}
	// Not in a directory about to be made opaque: nothing would show
	// through there.
	frozen := map[string]bool{}
	for _, dir := range opaque {
		frozen[filepath.ToSlash(dir)] = true
	}
	for _, p := range c.Unchanged {
		if frozen[path.Dir(p)] {
			continue
		}
		if err := removeUpper(upper, p); err != nil {
			return nil, err
		}
	}
	return markers, nil
}

// stagedFile is a file's new content written in the work directory (tmp),
// to be renamed to full, path's place in the upperdir.
type stagedFile struct{ path, full, tmp string }

// stageUpper writes data for path in work, the overlay's work directory
// (on the upperdir's filesystem), with the mode of the file it will
// replace (0644 for a whiteout or symlink); renamed in, it takes the
// place of what is there.
func stageUpper(upper, work, path string, data []byte) (stagedFile, error) {
	full := filepath.Join(upper, filepath.FromSlash(path))
	mode := os.FileMode(0o644)
	if fi, err := os.Lstat(full); err == nil && fi.Mode().IsRegular() {
		mode = fi.Mode().Perm()
	}
	f, err := os.CreateTemp(work, "rebase-")
	if err != nil {
		return stagedFile{}, fmt.Errorf("write %s into the upperdir: %w", path, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), mode)
	}
	if err != nil {
		os.Remove(f.Name())
		return stagedFile{}, fmt.Errorf("write %s into the upperdir: %w", path, err)
	}
	return stagedFile{path: path, full: full, tmp: f.Name()}, nil
}

func removeUpper(upper, path string) error {
	err := os.RemoveAll(filepath.Join(upper, filepath.FromSlash(path)))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
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

// dropRemovedDirs removes from the (unmounted) upperdir the directories
// whose removal by the head stands (publish.Changeset.StaysRemoved: ours
// only touched their metadata, as a build making an ignored file in one
// does), and what they hold: on the head's lower layer they would be new
// directories, and the next commit would bring them back. It returns the
// uncommitted entries that went with them (ignored paths, special files).
func (w *workspace) dropRemovedDirs(res *publish.Result, c *publish.Capture) ([]api.UncommittedPath, error) {
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
		if err := os.RemoveAll(filepath.Join(w.upper(), filepath.FromSlash(ch.Path))); err != nil {
			return nil, fmt.Errorf("drop %s, which the head removed: %w", ch.Path, err)
		}
		// Its parents the head removed too, copied up only to hold it
		// (their metadata unchanged), go once empty.
		for dir := path.Dir(ch.Path); dir != "."; dir = path.Dir(dir) {
			be, okBase := lookup(base, dir)
			he, okHead := lookup(head, dir)
			if !okBase || !okHead || be == nil || he != nil ||
				os.Remove(filepath.Join(w.upper(), filepath.FromSlash(dir))) != nil {
				break
			}
		}
		for _, u := range uncommittedPaths {
			if strings.HasPrefix(u.Path, ch.Path+"/") && !slices.Contains(dropped, u) {
				dropped = append(dropped, u)
			}
		}
	}
	return dropped, nil
}
