package sessions

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/fusefs"
	"github.com/layerfs/layerfs/object"
)

// nextView is the overlay a commit switches the Workspace to, to follow
// the new head, mounted before it is needed: while a command runs (Exec),
// or beside the commit's capture and publish rather than after them. The
// Commit it will show does not exist yet, so its lower layer is a Slot of
// the FUSE mount (fusefs.Slot), bound once the Commit lands. It uses the
// next generation's directories. The mount takes about a millisecond,
// mostly waiting (the lower layer's attributes and statfs through FUSE,
// the work directory's setup on disk); a commit's switch is then the Bind
// and the attach.
type nextView struct {
	gen   int
	ready chan struct{} // closed when the fields below are set
	slotView
	err error
}

// slotView is an overlay mounted ahead of need, detached, over an unbound
// Slot: the Commit it shows is chosen when it is used (bind). Both a
// commit's next view and the spare Workspace are one.
type slotView struct {
	slot *fusefs.Slot
	mfd  int // the detached overlay, or -1
}

// mountSlotView mounts a slotView with upper and work as its directories.
func (d *Daemon) mountSlotView(upper, work string) (slotView, error) {
	slot, err := d.fuse.NewSlot()
	if err != nil {
		return slotView{mfd: -1}, err
	}
	defer slot.Release() // the overlay holds the Slot's directory: its name is not needed
	mfd, err := overlayDetached(slot.Path(), d.dataDir(), upper, work)
	return slotView{slot: slot, mfd: mfd}, err
}

// bind makes the view show commit, and returns the data layer's tick for
// the Workspace's shown: the Bind's, since no lookup reached the view
// before it (an earlier tick would hold back eviction).
func (v *slotView) bind(d *Daemon, commit object.ID) (int64, error) {
	if err := v.slot.Bind(commit); err != nil {
		return 0, err
	}
	return d.tick(), nil
}

// close unmounts the view, unless its mount was handed on.
func (v *slotView) close() {
	if v.mfd >= 0 {
		unix.Close(v.mfd)
		v.mfd = -1
	}
}

// prepareNext starts mounting the next view. Callers hold w.mu, and hand
// the view to follow, discard it, or keep it in w.next.
func (w *workspace) prepareNext() *nextView {
	nv := &nextView{gen: w.rec.Gen + 1, ready: make(chan struct{}), slotView: slotView{mfd: -1}}
	upper, work := w.genDirs(nv.gen)
	go func() {
		defer close(nv.ready)
		// Directories of this generation can only be a crash's leftovers
		// (a view prepared and never shown); a used work directory would
		// make overlayfs refuse the mount.
		if nv.err = w.freshDirs(upper, work); nv.err != nil {
			return
		}
		nv.slotView, nv.err = w.d.mountSlotView(upper, work)
	}()
	return nv
}

// takeNext takes the Workspace's prepared view, if any. Callers hold
// w.mu.
func (w *workspace) takeNext() *nextView {
	nv := w.next
	w.next = nil
	return nv
}

// aheadOfCommand does, beside a command's start, what the command and
// the commit after it would otherwise wait for. It looks up the big files
// the view's Commit changed (lookUpAhead), and starts mounting the next
// view, unless one is ready or on its way: a commit that follows finds it
// mounted, and its capture does not share the cores with the mount.
func (w *workspace) aheadOfCommand() {
	// Not behind a long reader (an inspect's dry capture), which would hold
	// up this command and, meanwhile, every new reader: a commit with no
	// view ready makes one itself, and the command looks its files up.
	if !w.mu.TryLock() {
		return
	}
	defer w.mu.Unlock()
	if w.ended() != nil {
		return
	}
	w.lookUpAhead()
	if w.next == nil {
		w.next = w.prepareNext()
	}
}

// unmount unmounts the view, keeping its directories.
func (nv *nextView) unmount() {
	<-nv.ready
	nv.close()
}

// wait waits for the view and reports whether it is there to use.
func (nv *nextView) wait() error {
	<-nv.ready
	return nv.err
}

// discard unmounts the view, if it was mounted, and removes its
// directories: the next generation's, which the caller may make again.
func (nv *nextView) discard(w *workspace) {
	nv.unmount()
	if nv.gen <= w.rec.Gen {
		return // not a generation to come: never the live one's directories
	}
	upper, work := w.genDirs(nv.gen)
	os.RemoveAll(work)
	os.RemoveAll(upper)
}

// freshDirs makes upper and work, a generation's directories to come,
// empty. What is there is a crash's leftover: the work directory holds
// nothing of value, but an upper directory with entries may hold a user's
// writes (a crash between a switch and the save of the record that names
// it), so it is moved aside, kept and logged, never removed.
func (w *workspace) freshDirs(upper, work string) error {
	os.RemoveAll(work)
	if aside, err := keepAside(upper); err != nil {
		return err
	} else if aside != "" {
		w.d.log.Printf("workspace %s: %s held files no record names; kept at %s", w.rec.ID, upper, aside)
	} else {
		os.Remove(upper) // an empty one
	}
	return makeDirs(upper, work)
}

// trashPrefix begins the names of the directories trash makes.
const trashPrefix = "trash-"

// trash removes dirs, directories of the Workspace's whose names a
// generation to come takes again (the next one's, after a switch to it
// failed), in the background: it first moves them into a directory of a
// name of its own (trash-*), which is what the remover removes, however
// late it comes to it. Removed by their own names, they could be a new
// view's directories by then, its upperdir holding what commands wrote
// since. A directory that cannot be moved is removed here and now. A
// restart removes what a crash left (removeOldGenerations). Callers
// hold w.mu.
func (w *workspace) trash(dirs ...string) {
	bin, err := os.MkdirTemp(w.dir(), trashPrefix)
	if err != nil {
		w.logf("remove %v: %v; removing them now", dirs, err)
		for _, d := range dirs {
			os.RemoveAll(d)
		}
		return
	}
	for _, d := range dirs {
		if err := os.Rename(d, filepath.Join(bin, filepath.Base(d))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			w.logf("remove %s: %v; removing it now", d, err)
			os.RemoveAll(d)
		}
	}
	removeInBackground(bin)
}

// genDirs are the upper and work directories of generation gen.
func (w *workspace) genDirs(gen int) (upper, work string) {
	g := strconv.Itoa(gen)
	return w.dir("upper-" + g), w.dir("work-" + g)
}

// keepAside moves upper, an upperdir no generation will show, to a name
// of its own beside it (.kept-*, which restarts leave alone) if it holds
// anything, and returns that name; "" if it is empty or missing.
func keepAside(upper string) (string, error) {
	if empty, err := dirEmpty(upper); err != nil || empty {
		return "", nil
	}
	aside := fmt.Sprintf("%s.kept-%d", upper, time.Now().UnixNano())
	if err := os.Rename(upper, aside); err != nil {
		return "", fmt.Errorf("move aside %s: %w", upper, err)
	}
	return aside, nil
}
