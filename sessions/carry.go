package sessions

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/internal/longpath"
	"github.com/layerfs/layerfs/internal/ovl"
	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/publish"
	"github.com/layerfs/layerfs/store"
)

// carry is what a commit leaves out of the Store — paths the ignore rules
// match, FIFOs, sockets and devices — and the Workspace keeps when it
// follows the new head: their entries move from the old upperdir to the
// new one (rename: no byte is copied), under plain directories with the
// new Commit's metadata. A command still running keeps writing to what it
// has open there, and a socket it listens on stays its. A discard carries
// them the same way onto the Commit the Workspace already shows.
//
// An entry in the new upperdir sits on the new Commit where the old one
// sat on the old: capture left those paths alone, so the new lower layer
// holds what the old one did at each, with two exceptions the carry
// settles through the old view before it goes (prepareCarry):
//   - a metacopy file (a chmod, a rename) takes its data from the lower
//     layer: its data is copied up;
//   - a directory renamed (an overlayfs redirect) takes its lower entries
//     from the path it was renamed from, which the Commit may have
//     removed: the whole directory is copied up, and in the new upperdir
//     it and every directory below it become opaque, without redirects.
//
// An entry whose directory the head holds as something other than a
// directory, or not at all (another Workspace removed it), cannot sit
// there: it is dropped with the old upperdir, and reported.
type carry struct {
	kept    []api.UncommittedPath
	dropped []api.UncommittedPath
	opaque  []string // directories fully copied up, to make opaque
	// dir looks a directory up in the Commit the Workspace moves to: the
	// directories move makes take its metadata, so that they show no
	// change of their own.
	dir func(path string) (store.Entry, error)
}

// uncommitted lists what capture left out of an upperdir, sorted.
func uncommitted(c *publish.Capture) []api.UncommittedPath {
	var out []api.UncommittedPath
	for _, p := range c.Ignored {
		out = append(out, api.UncommittedPath{Path: p, Why: api.UncommittedIgnored})
	}
	for _, p := range c.Skipped {
		out = append(out, api.UncommittedPath{Path: p, Why: api.UncommittedSpecial})
	}
	slices.SortFunc(out, func(a, b api.UncommittedPath) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// prepareCarry decides what of c's uncommitted paths the Workspace keeps
// on Commit head, and copies up through its view, still the old one,
// what the move needs. It returns nil if there is nothing to carry.
// Callers hold w.mu.
func (w *workspace) prepareCarry(c *publish.Capture, head object.ID) *carry {
	all := uncommitted(c)
	if len(all) == 0 {
		return nil
	}
	tree, err := w.headTree(head)
	cr := &carry{dir: func(path string) (store.Entry, error) { return w.d.s.Lookup(tree, path) }}
	scan := newKeptScan(w.upper(), w.keptSeen)
	defer func() { w.keptSeen = scan.next }()
	for _, u := range all {
		if err == nil {
			err = w.placeable(tree, u.Path)
		}
		if err == nil {
			err = w.copyUpUnder(u.Path, scan, cr)
		}
		if err != nil {
			w.logf("not keeping %s: %v", u.Path, err)
			cr.dropped = append(cr.dropped, u)
		} else {
			cr.kept = append(cr.kept, u)
		}
		if tree != object.Zero {
			err = nil // this path's trouble; the next may be kept
		}
	}
	return cr
}

// errNoDir: an entry's directory is not one in the Commit the Workspace
// moves to.
var errNoDir = errors.New("its directory is not one in the Commit the Workspace now shows")

func (w *workspace) headTree(head object.ID) (object.ID, error) {
	c, err := w.d.s.Commit(head)
	if err != nil {
		return object.Zero, err
	}
	return c.Tree, nil
}

// placeable checks that path's directory is a directory in tree.
func (w *workspace) placeable(tree object.ID, path string) error {
	i := strings.LastIndexByte(path, '/')
	if i < 0 {
		return nil // the root's
	}
	dir := path[:i]
	e, err := w.d.s.Lookup(tree, dir)
	if errors.Is(err, store.ErrNotFound) || err == nil && e.Type != store.TypeDir {
		return fmt.Errorf("%s: %w", dir, errNoDir)
	}
	return err
}

// copyUpUnder copies up through the view what the upper entry at path
// takes from the lower layer: the data of its metacopy files, and all of
// every renamed directory, whose directories it adds to cr.opaque. scan
// finds them.
func (w *workspace) copyUpUnder(path string, scan *keptScan, cr *carry) error {
	scan.metacopy, scan.renamed = scan.metacopy[:0], scan.renamed[:0]
	if err := scan.entry(filepath.FromSlash(path)); err != nil {
		return err
	}
	metacopy, renamed := scan.metacopy, scan.renamed
	view, err := w.writableView()
	if err != nil {
		return err
	}
	for _, rel := range metacopy {
		if err := copyUpFile(filepath.Join(view, rel)); err != nil {
			return err
		}
	}
	for _, rel := range renamed {
		if err := w.copyUpRenamed(rel, cr); err != nil {
			return err
		}
	}
	return nil
}

// copyUpRenamed copies up through the view all of the renamed directory
// at rel (upper-relative), and adds its directories to cr.opaque.
func (w *workspace) copyUpRenamed(rel string, cr *carry) error {
	view, err := w.writableView()
	if err != nil {
		return err
	}
	if err := copyUpTree(filepath.Join(view, rel)); err != nil {
		return err
	}
	upper := w.upper()
	return filepath.WalkDir(filepath.Join(upper, rel), func(abs string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			r, _ := filepath.Rel(upper, abs)
			cr.opaque = append(cr.opaque, r)
		}
		return goneOK(err)
	})
}

// copyUpFile copies a file's data up through an overlay: opening it for
// writing does, and changes nothing else (not following a symlink, not
// waiting on a FIFO a command may have put there since).
func copyUpFile(path string) error {
	f, err := longpath.Open(path, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return goneOK(err)
	}
	return f.Close()
}

// copyUpTree copies up through an overlay everything below dir, a
// directory of the view: files by their data, the rest by a chown that
// changes no owner (which copies an entry up, and only touches its ctime).
func copyUpTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return goneOK(err)
		}
		if d.Type().IsRegular() {
			return copyUpFile(p)
		}
		return goneOK(unix.Lchown(p, -1, -1))
	})
}

// goneOK ignores an entry removed meanwhile (a command may still be
// running): what is gone needs no copy-up.
func goneOK(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// move moves the kept entries from oldUpper to newUpper, neither of them
// mounted by an overlay that will be used again. An entry that fails to
// move is dropped, and logged.
func (cr *carry) move(oldUpper, newUpper string, log func(string, ...any)) {
	made := map[string]bool{} // directories made in newUpper
	var dirs []madeDir
	kept := cr.kept[:0]
	for _, u := range cr.kept {
		err := cr.moveOne(oldUpper, newUpper, u.Path, made, &dirs)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since the capture, by a command still running
		}
		if err != nil {
			log("not keeping %s: %v", u.Path, err)
			cr.dropped = append(cr.dropped, u)
			continue
		}
		kept = append(kept, u)
	}
	cr.kept = kept
	// Moving entries in touched the directories' times: they get the
	// Commit's.
	for _, dir := range dirs {
		utimesL(filepath.Join(newUpper, dir.path), dir.times[:])
	}
	cr.settleOpaque(newUpper, log)
	slices.SortFunc(cr.dropped, func(a, b api.UncommittedPath) int { return strings.Compare(a.Path, b.Path) })
}

// settleOpaque makes the directories copyUpRenamed copied up whole
// opaque in upper, not mounted: they hold all their entries now, and
// take none from the lower layer, nor from where they were renamed from.
func (cr *carry) settleOpaque(upper string, log func(string, ...any)) {
	for _, dir := range cr.opaque {
		p := filepath.Join(upper, dir)
		if err := removexattrL(p, ovl.Redirect); err != nil && !errors.Is(err, unix.ENODATA) && !errors.Is(err, unix.ENOENT) {
			log("make %s opaque: %v", dir, err)
		}
		if err := setxattrL(p, ovl.Opaque, []byte("y")); err != nil && !errors.Is(err, unix.ENOENT) {
			log("make %s opaque: %v", dir, err)
		}
	}
}

// madeDir is a directory move made, and the times to give it.
type madeDir struct {
	path  string
	times [2]unix.Timespec // atime, mtime
}

// moveOne moves one entry, making its directories in newUpper as plain
// directories with the metadata the Commit gives them (cr.dir).
func (cr *carry) moveOne(oldUpper, newUpper, path string, made map[string]bool, dirs *[]madeDir) error {
	parts := strings.Split(path, "/")
	for i := 1; i < len(parts); i++ {
		dir := strings.Join(parts[:i], "/")
		if made[dir] {
			continue
		}
		e, err := cr.dir(dir)
		if err != nil {
			return err
		}
		p := filepath.Join(newUpper, dir)
		if err := mkdirL(p, 0o700); err != nil {
			return fmt.Errorf("mkdir %s: %w", dir, err)
		}
		if err := lchownL(p, int(e.UID), int(e.GID)); err != nil {
			return err
		}
		if err := chmodL(p, e.Mode&0o7777); err != nil {
			return err
		}
		made[dir] = true
		t := unix.NsecToTimespec(e.MTime)
		*dirs = append(*dirs, madeDir{dir, [2]unix.Timespec{t, t}})
	}
	rel := filepath.FromSlash(path)
	return renameL(filepath.Join(oldUpper, rel), filepath.Join(newUpper, rel))
}

// returnCarried moves back into the upperdir what a commit or discard had
// carried to the next generation's, from (carry.move), when a crash
// stopped it before the record naming that generation was saved: the
// Workspace resumes on the generation its record names, where those
// entries are missing. An entry goes back where the upperdir has nothing
// at its path, and directories on both sides merge; the rest stays, for
// freshDirs to set aside. Moving the entries out had touched the times
// of the upperdir's directories, which capture would take for changes:
// they get those of their counterparts, which move gave the Commit's.
func (w *workspace) returnCarried(from string) {
	if n := mergeBack(from, w.upper()); n > 0 {
		w.logf("%d entries carried to %s before a crash are back in %s", n, from, w.upper())
	}
}

// mergeBack moves src's entries into dst where dst has none of the same
// name, and merges the directories both hold, giving dst's the times of
// src's; it returns how many entries moved.
func mergeBack(src, dst string) int {
	dir, err := longpath.Open(src, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return 0
	}
	entries, err := dir.ReadDir(-1)
	dir.Close()
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		s, d := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		var st, sst unix.Stat_t
		switch err := lstatL(d, &st); {
		case errors.Is(err, unix.ENOENT):
			if renameL(s, d) == nil {
				n++
			}
		case err == nil && e.IsDir() && st.Mode&unix.S_IFMT == unix.S_IFDIR && lstatL(s, &sst) == nil:
			if k := mergeBack(s, d); k > 0 {
				n += k
				utimesL(d, []unix.Timespec{sst.Atim, sst.Mtim})
			}
			removeL(s) // if now empty
		}
	}
	return n
}
