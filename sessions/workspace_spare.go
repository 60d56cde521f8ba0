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

// spares keeps one Workspace made ahead of need, seen at api.DefaultPath:
// its directories, its overlay (a detached mount, seen nowhere yet) and a
// holder that shows it. The overlay's lower layer is an unbound Slot of
// the FUSE mount (fusefs.Slot), so the spare fits any branch at any head,
// and a commit, which moves a head, leaves it as good as it was. A create
// at that path binds the Slot to the head it leases, attaches the overlay
// at the host path and saves the record; the mkdirs, the mount and the
// namespace work are done before, on a thread at background priority
// (backgroundPriority). A spare holds no Lease.
type spares struct {
	d *Daemon

	mu      sync.Mutex
	ready   *spare
	making  *making // the spare being made, if any
	filling bool
	closed  bool
	done    sync.WaitGroup
}

type spare struct {
	w *workspace
	slotView
}

// making is a spare on its way, made by thread tid (0 until the thread
// has started); done is closed when it is ready (or failed).
type making struct {
	tid    atomic.Int32
	wanted atomic.Bool // a create waits for it: its thread runs at normal priority
	done   chan struct{}
	start  sync.Once // starts its thread
}

// spareWait bounds how long a create waits for a spare on its way before
// it goes the normal way.
const spareWait = 20 * time.Millisecond

// spareDelay is how long after the create that took the last spare the
// next one starts being made, unless a create asks for it sooner: the
// thread, the mount and the namespace work started at once held up the
// create's reply on two busy cores (0.35-0.45 ms of it).
const spareDelay = 2 * time.Millisecond

// take returns the spare, shown as branch at head, if one fits path, and
// the caller then owns it. If one is on its way, take raises the thread
// making it to normal priority and waits for it: finishing it costs less
// than a create from scratch beside it, which would also compete with it
// for the cores.
func (s *spares) take(branch string, head object.ID, path string) *spare {
	if path != api.DefaultPath {
		return nil
	}
	s.mu.Lock()
	sp, m := s.ready, s.making
	s.ready = nil
	s.mu.Unlock()
	if sp == nil && m != nil {
		m.wanted.Store(true) // a thread not started yet raises itself (run)
		s.start(m)
		if tid := m.tid.Load(); tid != 0 {
			unix.Setpriority(unix.PRIO_PROCESS, int(tid), 0)
		}
		select {
		case <-m.done:
		case <-time.After(spareWait):
			return nil
		}
		s.mu.Lock()
		sp, s.ready = s.ready, nil
		s.mu.Unlock()
	}
	if sp == nil {
		return nil
	}
	shown, err := sp.bind(s.d, head)
	if err != nil {
		s.d.log.Printf("show %s in the spare Workspace: %v", head.Short(), err)
		sp.discard()
		return nil
	}
	sp.w.rec.Branch, sp.w.rec.Lease = branch, head.String()
	sp.w.shown.Store(shown)
	return sp
}

// fill makes sure a spare is ready or on its way, in the background,
// starting after spareDelay. The spare counts as on its way from now, not
// from when its thread starts.
func (s *spares) fill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.filling || s.closed || s.ready != nil {
		return
	}
	s.filling = true
	m := &making{done: make(chan struct{})}
	s.making = m
	s.done.Add(1)
	time.AfterFunc(spareDelay, func() { s.start(m) })
}

// start starts m's thread, once.
func (s *spares) start(m *making) { m.start.Do(func() { go s.run(m) }) }

// run makes the spare m announces, at background priority (on a thread
// it has to itself until then).
func (s *spares) run(m *making) {
	defer s.done.Done()
	runtime.LockOSThread()
	defer func() {
		// Back to the runtime's threads if back to normal priority (else
		// it ends with the goroutine): a thread made for every spare cost
		// a clone and an exit, slow in a virtual machine.
		if unix.Setpriority(unix.PRIO_PROCESS, 0, 0) == nil {
			runtime.UnlockOSThread()
		}
	}()
	backgroundPriority()
	m.tid.Store(int32(unix.Gettid()))
	if m.wanted.Load() {
		unix.Setpriority(unix.PRIO_PROCESS, 0, 0)
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	var sp *spare
	var err error
	if !closed {
		sp, err = s.make()
	}
	s.mu.Lock()
	s.making, s.filling = nil, false
	if err == nil && !s.closed {
		s.ready, sp = sp, nil
	}
	s.mu.Unlock()
	close(m.done)
	if sp != nil {
		sp.discard()
	}
	if err != nil {
		s.d.log.Printf("make a spare Workspace: %v", err)
	}
}

// make builds a spare.
func (s *spares) make() (*spare, error) {
	w := &workspace{d: s.d, rec: record{ID: newID(), Path: api.DefaultPath}}
	sp := &spare{w: w, slotView: slotView{mfd: -1}}
	if err := makeDirs(w.upper(), w.work(), w.hostPath()); err != nil {
		sp.discard()
		return nil, err
	}
	err := os.WriteFile(filepath.Join(w.dir(), spareMarker), nil, 0o600)
	if err == nil {
		sp.slotView, err = s.d.mountSlotView(w.upper(), w.work())
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
	sp.close()
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
