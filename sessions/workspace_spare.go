package sessions

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/object"
)

// spareMarker marks a spare's directory: a restart removes directories
// that hold it and no record.
const spareMarker = "spare"

// spares keeps one Workspace made ahead of need, of the branch a Workspace
// was last created of, at its head, seen at api.DefaultPath: its
// directories, its overlay (a detached mount, seen nowhere yet) and a
// holder that shows it. A create that finds it fitting (same branch, head
// and path) only takes the Lease, attaches the overlay at the host path
// and saves the record; the mkdirs, the mount and the namespace work are
// done before, on a thread at background priority (backgroundPriority). A spare holds no
// Lease: it is taken only while its Commit is the branch's head, which no
// gc removes. A spare gone stale (the head moved) gets an overlay of the
// new head in the holder it has (refresh); one of another branch is
// dropped and another made.
type spares struct {
	d *Daemon

	mu      sync.Mutex
	ready   *spare
	making  *making // the spare being made, if any
	branch  string  // what to keep a spare of
	filling bool
	closed  bool
	done    sync.WaitGroup
}

type spare struct {
	w   *workspace
	mfd int // the detached overlay
}

// making is a spare on its way, made by thread tid (0 until the thread
// has started); done is closed when it is ready (or failed).
type making struct {
	branch string
	head   object.ID
	tid    atomic.Int32
	wanted atomic.Bool // a create waits for it: its thread runs at normal priority
	done   chan struct{}
}

// spareWait bounds how long a create waits for a fitting spare on its
// way before it goes the normal way.
const spareWait = 20 * time.Millisecond

// take returns the spare if it fits, and the caller then owns it. If a
// fitting one is on its way, take raises the thread making it to normal
// priority and waits for it: finishing it costs less than a create from
// scratch beside it, which would also compete with it for the cores.
func (s *spares) take(branch string, head object.ID, path string) *spare {
	s.mu.Lock()
	if sp := s.takeReady(branch, head, path); sp != nil {
		s.mu.Unlock()
		return sp
	}
	m := s.making
	s.mu.Unlock()
	if m == nil || m.branch != branch || m.head != head || path != api.DefaultPath {
		return nil
	}
	m.wanted.Store(true) // a thread not started yet raises itself (run)
	if tid := m.tid.Load(); tid != 0 {
		unix.Setpriority(unix.PRIO_PROCESS, int(tid), 0)
	}
	select {
	case <-m.done:
	case <-time.After(spareWait):
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.takeReady(branch, head, path)
}

// takeReady takes the ready spare if it fits. s.mu must be held.
func (s *spares) takeReady(branch string, head object.ID, path string) *spare {
	sp := s.ready
	if sp == nil || !sp.of(branch, head) || path != sp.w.rec.Path {
		return nil
	}
	s.ready = nil
	return sp
}

// of reports whether sp is a Workspace of branch at head.
func (sp *spare) of(branch string, head object.ID) bool {
	return sp.w.rec.Branch == branch && sp.w.rec.Lease == head.String()
}

// fill makes sure a spare of branch is ready or on its way, in the
// background; head is the branch's head as the caller knows it. The spare
// counts as on its way from now, not from when its thread starts: a
// create that came in between went the slow way (9 of 79 in a run of
// edit lifecycles).
func (s *spares) fill(branch string, head object.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.branch = branch
	if s.filling || s.closed {
		return
	}
	s.filling = true
	m := &making{branch: branch, head: head, done: make(chan struct{})}
	if sp := s.ready; sp == nil || !sp.of(branch, head) {
		s.making = m
	}
	s.done.Add(1)
	go s.run(m)
}

// run replaces a missing or stale spare until one fits what is wanted,
// at background priority (a thread of its own, ended with it). m is the
// spare fill announced.
func (s *spares) run(m *making) {
	defer s.done.Done()
	runtime.LockOSThread() // never unlocked: the thread goes with its priority
	backgroundPriority()
	tid := int32(unix.Gettid())
	m.tid.Store(tid)
	if m.wanted.Load() {
		unix.Setpriority(unix.PRIO_PROCESS, 0, 0)
	}
	// givenUp ends the announced spare, m, when it will not be made.
	givenUp := func() {
		if m != nil {
			if s.making == m {
				s.making = nil
			}
			close(m.done)
			m = nil
		}
	}
	for {
		s.mu.Lock()
		branch, closed := s.branch, s.closed
		s.mu.Unlock()
		b, err := s.d.s.Branch(branch)
		if closed || err != nil {
			s.mu.Lock()
			givenUp()
			s.filling = false
			s.mu.Unlock()
			return
		}
		s.mu.Lock()
		stale := s.ready
		if stale != nil && stale.of(branch, b.Head) {
			givenUp()
			s.filling = false
			s.mu.Unlock()
			return
		}
		s.ready = nil
		if m == nil || m.branch != branch || m.head != b.Head {
			givenUp()
			m = &making{branch: branch, head: b.Head, done: make(chan struct{})}
			m.tid.Store(tid)
		}
		s.making = m
		s.mu.Unlock()
		var sp *spare
		if stale != nil && stale.w.rec.Branch == branch {
			// The head moved: the stale spare keeps its holder and
			// directory, and shows the new head.
			if err = s.refresh(stale, b.Head); err == nil {
				sp, stale = stale, nil
			} else {
				s.d.log.Printf("show %s's head in its spare Workspace: %v; making another", branch, err)
			}
		}
		if sp == nil {
			sp, err = s.make(branch, b.Head)
		}
		s.mu.Lock()
		s.making = nil
		closed = s.closed
		if err == nil && !closed {
			s.ready, sp = sp, nil
		}
		s.mu.Unlock()
		close(m.done)
		m = nil
		if stale != nil {
			stale.discard() // after the new one is ready: a create may be waiting for it
		}
		if sp != nil {
			sp.discard()
		}
		if err != nil {
			s.d.log.Printf("make a spare Workspace of %s: %v", branch, err)
		}
		if err != nil || closed {
			s.mu.Lock()
			s.filling = false
			s.mu.Unlock()
			return
		}
	}
}

// make builds a spare of branch at head.
func (s *spares) make(branch string, head object.ID) (*spare, error) {
	w := &workspace{d: s.d, rec: record{ID: newID(), Branch: branch, Lease: head.String(), Path: api.DefaultPath}}
	sp := &spare{w: w, mfd: -1}
	for _, p := range []string{w.upper(), w.work(), w.hostPath()} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			sp.discard()
			return nil, err
		}
	}
	err := os.WriteFile(filepath.Join(w.dir(), spareMarker), nil, 0o600)
	if err == nil {
		w.shown.Store(s.d.tick())
		sp.mfd, err = overlayDetached(w.lower(), s.d.dataDir(), w.upper(), w.work())
	}
	if err == nil {
		w.holder, err = s.d.holders.get()
	}
	if err == nil {
		err = w.holder.bindDetached(sp.mfd, w.rec.Path)
	}
	if err != nil {
		sp.discard()
		return nil, err
	}
	return sp, nil
}

// refresh turns sp, a spare of its branch's former head, into one of
// head: a fresh overlay, with new upper and work directories, replaces
// the old one in its holder's namespace. A holder costs more to make
// than an overlay (a thread, a mount namespace, and the unmounts that
// isolate it), and every Commit on the branch makes its spare stale.
func (s *spares) refresh(sp *spare, head object.ID) error {
	w := sp.w
	oldUpper, oldWork, oldLease := w.upper(), w.work(), w.rec.Lease
	w.rec.Lease = head.String()
	w.rec.Gen++
	undo := func(err error) error {
		w.rec.Lease = oldLease
		w.rec.Gen--
		return err
	}
	if err := w.makeDirs(); err != nil {
		return undo(err)
	}
	mfd, shown, err := w.mountView(nil)
	if err != nil {
		removeInBackground(w.upper(), w.work())
		return undo(err)
	}
	w.shown.Store(shown)
	unix.Close(sp.mfd)
	sp.mfd = mfd
	removeInBackground(oldUpper, oldWork)
	return nil
}

// use turns a taken spare into the Workspace: its overlay at the host
// path, its record saved. The caller has taken the Lease.
func (sp *spare) use() (*workspace, error) {
	w := sp.w
	err := unix.MoveMount(sp.mfd, "", unix.AT_FDCWD, w.hostPath(), unix.MOVE_MOUNT_F_EMPTY_PATH)
	unix.Close(sp.mfd)
	sp.mfd = -1
	if err != nil {
		err = fmt.Errorf("attach overlay at %s: %w", w.hostPath(), err)
	} else {
		err = w.rec.save(w.dir())
	}
	if err != nil {
		w.teardown()
		return nil, err
	}
	os.Remove(filepath.Join(w.dir(), spareMarker))
	return w, nil
}

// discard undoes make.
func (sp *spare) discard() {
	if sp.mfd >= 0 {
		unix.Close(sp.mfd)
		sp.mfd = -1
	}
	sp.w.teardown()
}

// close drops the spare and waits for one being made; no more are made.
func (s *spares) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.done.Wait()
	s.mu.Lock()
	sp := s.ready
	s.ready = nil
	s.mu.Unlock()
	if sp != nil {
		sp.discard()
	}
}

// isSpare reports whether dir is a spare's directory (a restart removes
// them).
func isSpare(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, spareMarker))
	return err == nil
}
