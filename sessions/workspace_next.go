package sessions

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/fusefs"
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
	slot  *fusefs.Slot
	mfd   int // the detached overlay
	err   error
}

// prepareNext starts mounting the next view. Callers hold w.mu, and hand
// the view to follow, discard it, or keep it in w.next.
func (w *workspace) prepareNext() *nextView {
	nv := &nextView{gen: w.rec.Gen + 1, ready: make(chan struct{}), mfd: -1}
	upper, work := w.genDirs(nv.gen)
	go func() {
		defer close(nv.ready)
		// Directories of this generation can only be a crash's leftovers
		// (a view prepared and never shown); a used work directory would
		// make overlayfs refuse the mount.
		if nv.err = w.freshDirs(upper, work); nv.err != nil {
			return
		}
		nv.slot, nv.err = w.d.fuse.NewSlot()
		if nv.err != nil {
			return
		}
		// The overlay holds the Slot's directory from here on: its name
		// is no longer needed.
		defer nv.slot.Release()
		nv.mfd, nv.err = overlayDetached(nv.slot.Path(), w.d.dataDir(), upper, work)
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

// prepareForCommit starts mounting the next view while a command runs,
// unless one is ready or on its way: a commit that follows finds it
// mounted, and its capture does not share the cores with the mount.
func (w *workspace) prepareForCommit() {
	// Not behind a long reader (an inspect's dry capture), which would hold
	// up this command and, meanwhile, every new reader: a commit with no
	// view ready makes one itself.
	if !w.mu.TryLock() {
		return
	}
	defer w.mu.Unlock()
	if w.next == nil && w.ended() == nil {
		w.next = w.prepareNext()
	}
}

// unmount unmounts the view, keeping its directories.
func (nv *nextView) unmount() {
	<-nv.ready
	if nv.mfd >= 0 {
		unix.Close(nv.mfd)
		nv.mfd = -1
	}
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
	if empty, err := dirEmpty(upper); err == nil && !empty {
		aside := fmt.Sprintf("%s.kept-%d", upper, time.Now().UnixNano())
		if err := os.Rename(upper, aside); err != nil {
			return fmt.Errorf("move aside %s: %w", upper, err)
		}
		w.d.log.Printf("workspace %s: %s held files no record names; kept at %s", w.rec.ID, upper, aside)
	} else {
		os.Remove(upper) // an empty one
	}
	for _, p := range []string{upper, work} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// genDirs are the upper and work directories of generation gen.
func (w *workspace) genDirs(gen int) (upper, work string) {
	g := strconv.Itoa(gen)
	return w.dir("upper-" + g), w.dir("work-" + g)
}
