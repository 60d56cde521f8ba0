package sessions

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/internal/longpath"
	"github.com/layerfs/layerfs/internal/ovl"
	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/publish"
	"github.com/layerfs/layerfs/store"
)

// workspace is one live Workspace. mu serializes what changes its mounts
// (commit, discard, end); commands start under its read lock, so they
// always see a complete view.
type workspace struct {
	d      *Daemon
	mu     sync.RWMutex
	rec    record
	holder *holder
	// next is the overlay the next commit will switch to, mounted while a
	// command runs (see Exec and nextView), or nil.
	next *nextView
	// shown is the data layer's tick (Daemon.tick) at which the current
	// overlay was mounted, for its eviction.
	shown atomic.Int64
	// lookedUp is the generation, plus one, whose view a command's start
	// looked the Commit's big files up in (lookUpAhead), or 0.
	lookedUp int
	// keptSeen is what the last commit's carry found of the directories
	// it kept (keptScan), guarded by mu.
	keptSeen map[string]seenDir
	// described is the Workspace as describe last saw it (listed).
	described atomic.Pointer[api.Workspace]
	// unfollowed is the Commit the Workspace's last commit landed as, if
	// the switch to its view failed and the Workspace is still on the
	// record's lease (backOut), which the next commit, discard or end
	// moves it onto first (catchUp); zero if none. Guarded by mu. A restart
	// finds it in the Store's lease (landedBeforeCrash).
	unfollowed object.ID
	// frozen is set while a commit holds the view at the host path
	// read-only (freezeHost), guarded by mu.
	frozen *frozenHost
}

func (w *workspace) dir(parts ...string) string {
	return w.d.dir(append([]string{"ws", w.rec.ID}, parts...)...)
}

func (w *workspace) upper() string    { u, _ := w.genDirs(w.rec.Gen); return u }
func (w *workspace) work() string     { _, wk := w.genDirs(w.rec.Gen); return wk }
func (w *workspace) hostPath() string { return w.d.dir("mnt", w.rec.ID) }
func (w *workspace) lower() string    { return w.d.dir("lower", w.rec.Lease) }

// Create makes a Workspace of a branch: a Lease on its head, a fresh
// overlay over it, and a namespace where it appears at req.Path.
func (d *Daemon) Create(req api.CreateRequest) (api.Workspace, error) {
	if err := checkCreate(&req); err != nil {
		return api.Workspace{}, err
	}
	if err := d.reserve(); err != nil {
		return api.Workspace{}, err
	}
	w, err := d.create(req)
	d.settle(w)
	if err != nil {
		return api.Workspace{}, err
	}
	d.metrics.created.Add(1)
	return w.describe(), nil
}

func checkCreate(req *api.CreateRequest) error {
	if req.Branch == "" {
		req.Branch = store.MainBranch
	}
	if err := store.CheckBranchName(req.Branch); err != nil {
		return err // a name that cannot be a branch's: bad, not missing
	}
	if req.Path == "" {
		req.Path = api.DefaultPath
	}
	if !path.IsAbs(req.Path) || path.Clean(req.Path) != req.Path || req.Path == "/" {
		return fmt.Errorf("%w: path %q: want a clean absolute path other than /", ErrBadRequest, req.Path)
	}
	// What the kernel would refuse: a 400 here, not a failed mkdir's 500.
	if strings.IndexByte(req.Path, 0) >= 0 {
		return fmt.Errorf("%w: path %q holds a NUL byte", ErrBadRequest, req.Path)
	}
	if len(req.Path) >= unix.PathMax {
		return fmt.Errorf("%w: path of %d bytes: want at most %d", ErrBadRequest, len(req.Path), unix.PathMax-1)
	}
	for _, name := range strings.Split(req.Path[1:], "/") {
		if len(name) > unix.NAME_MAX {
			return fmt.Errorf("%w: path %q: a name of %d bytes: want at most %d", ErrBadRequest, req.Path, len(name), unix.NAME_MAX)
		}
	}
	if sys := systemPath(req.Path); sys != "" {
		return fmt.Errorf("%w: path %q would hide %s from the Workspace's commands: choose another (default %s)", ErrBadRequest, req.Path, sys, api.DefaultPath)
	}
	return nil
}

func (d *Daemon) create(req api.CreateRequest) (*workspace, error) {
	b, err := d.s.Branch(req.Branch)
	if err != nil {
		return nil, err
	}
	defer d.spares.fill() // for the next one
	if sp := d.spares.take(req.Branch, b.Head, req.Path); sp != nil {
		return d.createFromSpare(sp)
	}
	w := &workspace{d: d, rec: record{ID: newID(), Branch: req.Branch, Lease: b.Head.String(),
		Path: req.Path, Created: time.Now().UTC()}}
	if err := d.s.SetLease(w.rec.ID, w.rec.Branch, d.id, b.Head); err != nil {
		return nil, err
	}
	if err := w.setup(); err != nil {
		w.teardown()
		d.s.DropLease(w.rec.ID)
		return nil, fmt.Errorf("create workspace of %s: %w", req.Branch, err)
	}
	return w, nil
}

// createFromSpare makes a Workspace of a spare (see spares): a Lease, the
// overlay at the host path, the record.
func (d *Daemon) createFromSpare(sp *spare) (*workspace, error) {
	w := sp.w
	w.rec.Created = time.Now().UTC()
	if err := d.s.SetLease(w.rec.ID, w.rec.Branch, d.id, w.rec.lease()); err != nil {
		sp.discard()
		return nil, err
	}
	if _, err := sp.use(); err != nil {
		d.s.DropLease(w.rec.ID)
		return nil, fmt.Errorf("create workspace of %s: %w", w.rec.Branch, err)
	}
	d.metrics.fromSpare.Add(1)
	return w, nil
}

func newID() string {
	var b [6]byte
	rand.Read(b[:])
	return "ws-" + hex.EncodeToString(b[:])
}

// makeDirs makes directories of mode 0755, whatever the daemon's umask:
// an upperdir's mode is its Workspace's root's.
func makeDirs(paths ...string) error {
	for _, p := range paths {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
		if err := os.Chmod(p, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// setup makes the directories, takes a holder, shows the overlay and
// records the Workspace.
func (w *workspace) setup() error {
	if err := makeDirs(w.upper(), w.work(), w.hostPath()); err != nil {
		return err
	}
	h, err := w.d.holders.get()
	if err != nil {
		return err
	}
	w.holder = h
	if err := w.show(nil); err != nil {
		return err
	}
	return w.rec.save(w.dir())
}

// resume remounts a recorded Workspace after a restart, over the upperdir
// it had: uncommitted changes come back as they were. leased is the
// Commit the Store's Lease of the Workspace names (zero: none).
func (w *workspace) resume(leased object.ID) error {
	if err := w.undoInterruptedRebase(); err != nil {
		return err
	}
	if err := w.adoptMovedUpper(); err != nil {
		return err
	}
	landed := w.landedBeforeCrash(leased)
	w.removeOldGenerations()
	// The next generation's directories can only be what a crash left of
	// a commit's next view (prepareNext), or of a commit or discard that
	// had carried entries there: those go back (returnCarried). A used
	// work directory there would make overlayfs refuse the next mount.
	nextUpper, nextWork := w.genDirs(w.rec.Gen + 1)
	w.returnCarried(nextUpper)
	if err := w.freshDirs(nextUpper, nextWork); err != nil {
		return err
	}
	// A commit that landed keeps the Store's lease until the Workspace
	// has followed it: moved back to the record's, it would no longer
	// tell a restart after this one fails, or a crash in it, that the
	// commit landed (landedBeforeCrash).
	lease := w.rec.lease()
	if !landed.IsZero() {
		lease = landed
	}
	if err := w.d.s.SetLease(w.rec.ID, w.rec.Branch, w.d.id, lease); err != nil {
		return err
	}
	if err := forgetOrigins(w.upper()); err != nil {
		return err
	}
	// A crash can leave the work directory in a state overlayfs dislikes;
	// it holds nothing of value, so start a fresh one.
	os.RemoveAll(w.work())
	if err := w.setup(); err != nil {
		return err
	}
	if err := failpoint(FailpointResume); err != nil {
		return err
	}
	if !landed.IsZero() {
		_, _, err := w.finishLanded(landed)
		return err
	}
	return nil
}

// forgetOrigins removes from the files and symlinks of upper, an
// upperdir no overlay is mounted on, the file handles of the lower inodes
// overlayfs copied them up from (ovl.Origin). Those name nodes of the
// Store's FUSE mount by their FUSE node ids, which a new mount — every
// start's — gives to other nodes: a handle would name whatever node has
// its id now, and overlayfs, which follows it for a file copied up (it
// must, with metacopy), refused a file that now named a directory with
// ESTALE. After a restart, commands then read "Stale file handle" for
// files they had written before it. Without the handle overlayfs looks
// the lower layer up by path, as for every other entry; only the file's
// inode number changes.
func forgetOrigins(upper string) error {
	return filepath.WalkDir(upper, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return goneOK(err)
		}
		if err := unix.Lremovexattr(p, ovl.Origin); err != nil && !errors.Is(err, unix.ENODATA) && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("forget the origin of %s: %w", p, err)
		}
		return nil
	})
}

// landedBeforeCrash returns the Commit this Workspace's last commit landed
// as, if the Workspace did not follow it: a crash came between the
// landing, whose transaction moved the Store's lease (leased) to it, and
// the save of the record that follows it, or the switch to its view
// failed (follow). The Store's lease then names a Commit of this
// Workspace's own other than the record's. Zero if not.
func (w *workspace) landedBeforeCrash(leased object.ID) object.ID {
	if leased.IsZero() || leased == w.rec.lease() {
		return object.Zero
	}
	if c, err := w.d.s.Commit(leased); err == nil && c.Origin == store.OriginSession+w.rec.ID {
		return leased
	}
	return object.Zero
}

// removeOldGenerations removes the upper and work directories of
// generations before the current one, and the logs of their rebases: a
// commit took the changes of such an upperdir (or a discard dropped them,
// or a rebase moved it on) and a crash cut its removal in the background
// short, as of the directories trash moved away. Directories moved aside
// (.kept-*) stay.
func (w *workspace) removeOldGenerations() {
	entries, _ := os.ReadDir(w.dir())
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), trashPrefix) {
			removeInBackground(w.dir(e.Name()))
			continue
		}
		for _, prefix := range []string{"upper-", "work-", "rebase-"} {
			rest, ok := strings.CutPrefix(e.Name(), prefix)
			if n, err := strconv.Atoi(rest); ok && err == nil && n < w.rec.Gen {
				w.logf("removing %s, left by a crash", e.Name())
				removeInBackground(w.dir(e.Name()))
			}
		}
	}
}

// adoptMovedUpper takes up the next generation when the record names an
// upperdir that is gone while the next one holds the pending changes: a
// rebase a crash interrupted once it had renamed the upperdir (it moves
// the lease to the head it met, rewrites the upperdir and renames it
// before it saves the record; interrupted before the rename, it is
// undone: undoInterruptedRebase), or a switch whose record could not be
// saved (switchOverlay), whose old upperdir was then removed.
func (w *workspace) adoptMovedUpper() error {
	next := w.dir("upper-" + strconv.Itoa(w.rec.Gen+1))
	if _, err := os.Stat(w.upper()); err == nil {
		return nil
	}
	if _, err := os.Stat(next); err != nil {
		return nil
	}
	leases, err := w.d.s.Leases()
	if err != nil {
		return err
	}
	for _, l := range leases {
		if l.ID == w.rec.ID {
			w.rec.Lease = l.Commit.String()
		}
	}
	w.rec.Gen++
	w.d.log.Printf("workspace %s: its record names a generation gone (a rebase interrupted, or a record not saved); resuming on the next, on %.12s", w.rec.ID, w.rec.Lease)
	return nil
}

// teardown undoes setup as far as it got.
func (w *workspace) teardown() {
	w.detach()
	removeInBackground(w.dir(), w.hostPath())
}

// detach unmounts the Workspace and stops its holder, keeping its files
// and record.
func (w *workspace) detach() error {
	if nv := w.takeNext(); nv != nil {
		nv.unmount() // before the Store's FUSE mount, which it stacks on, goes
	}
	if w.holder != nil {
		w.d.reaper.release(w.holder.ns, w.holder.pin)
		w.holder.stop()
		w.holder = nil
	}
	return unmount(w.hostPath())
}

// ended reports, under w.mu, that the Workspace was ended (or detached
// by Close) while the caller waited for the lock.
func (w *workspace) ended() error {
	if w.holder == nil {
		return fmt.Errorf("workspace %s: %w", w.rec.ID, ErrNotFound)
	}
	return nil
}

func (w *workspace) describe() api.Workspace {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.describeLocked()
}

// describeLocked describes the Workspace, under mu, and keeps the
// description for listed.
func (w *workspace) describeLocked() api.Workspace {
	var unsettled []string
	for _, u := range w.rec.Unsettled {
		unsettled = append(unsettled, u.Path)
	}
	d := api.Workspace{ID: w.rec.ID, Branch: w.rec.Branch, Lease: w.rec.Lease, Path: w.rec.Path,
		HostPath: w.hostPath(), Created: w.rec.Created, Commits: w.rec.Commits, Unsettled: unsettled}
	w.described.Store(&d)
	return d
}

// listed describes the Workspace for List without waiting for it: while
// a commit, discard or end holds it — a commit hashes what changed, which
// can take a while — it is described as it was before that began, so
// that a list answers at once, and a client can tell a busy daemon from
// a wedged one by how soon it does.
func (w *workspace) listed() api.Workspace {
	if w.mu.TryRLock() {
		defer w.mu.RUnlock()
		return w.describeLocked()
	}
	if d := w.described.Load(); d != nil {
		return *d
	}
	return w.describe()
}

// Inspect describes a Workspace with its uncommitted changed paths: after
// a commit whose switch failed, those the Commit it landed as lacks.
func (d *Daemon) Inspect(id string) (api.Workspace, error) {
	w, err := d.get(id)
	if err != nil {
		return api.Workspace{}, err
	}
	w.mu.RLock()
	err = w.ended()
	var pending []string
	switch {
	case err != nil:
	case !w.unfollowed.IsZero():
		// Its last commit landed, but it is still on the view before:
		// what landed is not pending.
		pending, err = w.pendingLanded(w.unfollowed)
	default:
		pending, err = w.pending()
	}
	w.mu.RUnlock()
	if errors.Is(err, ErrNotFound) {
		return api.Workspace{}, err
	}
	desc := w.describe()
	desc.Pending = pending
	return desc, err
}

// pending lists the uncommitted changed paths, hashing but storing nothing.
func (w *workspace) pending() ([]string, error) {
	c, err := w.captureIfAny(publish.CaptureUpperDry)
	if c == nil || err != nil {
		return nil, err
	}
	return c.Changes.Paths(), nil
}

// captureIfAny captures the upperdir with capture, by the Workspace's
// ignore rules, or returns nil for an empty one: every change leaves an
// entry there, and neither the rules nor the upperdir need be read (an
// end right after a commit).
func (w *workspace) captureIfAny(capture func(*store.Store, publish.Upper) (*publish.Capture, error)) (*publish.Capture, error) {
	if empty, err := dirEmpty(w.upper()); err == nil && empty {
		return nil, nil
	}
	rules, err := w.ignoreRules()
	if err != nil {
		return nil, err
	}
	return capture(w.d.s, w.captured(rules))
}

// dirEmpty reports whether directory dir has no entries.
func dirEmpty(dir string) (bool, error) {
	f, err := longpath.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return false, err
	}
	defer f.Close()
	_, err = f.Readdirnames(1)
	if err == io.EOF {
		return true, nil
	}
	return false, err
}

// captured describes the Workspace's upperdir for capture.
func (w *workspace) captured(ignore *publish.Rules) publish.Upper {
	u := publish.Upper{Dir: w.upper(), Base: w.rec.lease(), Lower: w.lower(), Ignore: ignore}
	if w.d.data != nil { // a nil *dataLayer must stay a nil DataLayer
		u.Data = w.d.data
	}
	return u
}

// follow moves the Workspace to commit: a new Lease, a fresh overlay with
// an empty upperdir at the same paths; the old overlay is detached and its
// upperdir removed in the background. The overlay is next, if it is not
// nil and was mounted (nextView: while a command ran, or beside the
// commit's capture); follow owns next. The Lease (a Store write) overlaps
// the new directories, unless leased says the Store's Lease is on commit
// already: the Workspace's own commit, which landed with it, and which it
// counts once it follows it. Should follow fail then, that lease stays
// on commit, so that a restart finishes the landing (finishLanded),
// rather than bring the changes back as pending, to be committed twice;
// a running daemon does at the next commit or discard (unfollowed,
// catchUp).
// alongside, if not nil, runs on another
// goroutine while the overlay is switched (a Commit's audit, another
// Store write, beside mount calls). What the old upperdir holds that the
// commit left out and the Workspace keeps moves to the new one (carry),
// before the overlay over it is mounted. Callers hold w.mu.
func (w *workspace) follow(commit object.ID, alongside func(), leased bool, next *nextView, cr *carry) error {
	if next != nil && cr != nil {
		next.discard(w) // mounted over an empty upperdir: entries cannot move in under it
		next = nil
	}
	if next != nil && next.gen != w.rec.Gen+1 {
		next.unmount() // made for another generation: not this one's
		next = nil
	}
	if next != nil && next.wait() != nil {
		w.d.log.Printf("workspace %s: the next overlay was not made ahead (%v); making it now", w.rec.ID, next.err)
		next.discard(w)
		next = nil
	}
	if next == nil {
		// The overlay's mount looks the new Commit up in the Store's FUSE
		// mount (a FUSE request and a few queries, about 0.5 ms): start
		// that now, so it overlaps the lease and the mkdirs.
		go os.Stat(w.d.dir("lower", commit.String()))
	}
	lease := make(chan error, 1)
	if leased {
		lease <- nil
	} else {
		go func() { lease <- w.d.s.SetLease(w.rec.ID, w.rec.Branch, w.d.id, commit) }()
	}
	oldUpper, oldWork, oldLease := w.upper(), w.work(), w.rec.Lease
	w.rec.Gen++
	var err error
	if next == nil {
		err = w.makeDirs()
	}
	if err = errors.Join(err, <-lease); err != nil {
		w.rec.Gen-- // still on the old overlay
		if next != nil {
			next.discard(w)
		}
		return err
	}
	w.rec.Lease = commit.String()
	if leased {
		w.rec.Commits++
	}
	if cr != nil {
		// A crash from here to the record's save leaves the carried
		// entries in the new upperdir, whence the restart, on the old
		// generation, moves them back (returnCarried).
		cr.move(oldUpper, w.upper(), w.logf)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if alongside != nil {
			alongside()
		}
	}()
	err = w.switchOverlay(next)
	<-done
	if err != nil {
		w.backOut(oldUpper, oldLease, cr, leased)
		return err
	}
	w.unfollowed = object.Zero // on a head it leads to, if it was set
	removeInBackground(oldUpper, oldWork)
	return nil
}

// logf logs a line about the Workspace.
func (w *workspace) logf(format string, args ...any) {
	w.d.log.Printf("workspace %s: "+format, append([]any{w.rec.ID}, args...)...)
}

// remount puts a fresh overlay of the current lease at the Workspace's
// paths, and removes the old upper and work directories, after moving
// what cr keeps (nil: nothing) into the new upper directory.
func (w *workspace) remount(oldUpper, oldWork string, cr *carry) error {
	if nv := w.takeNext(); nv != nil {
		nv.discard(w) // made for a commit; this generation is remount's
	}
	w.rec.Gen++
	if err := w.makeDirs(); err != nil {
		w.rec.Gen--
		return err
	}
	if cr != nil {
		cr.move(oldUpper, w.upper(), w.logf)
	}
	if err := w.switchOverlay(nil); err != nil {
		w.backOut(oldUpper, w.rec.Lease, cr, false)
		return err
	}
	removeInBackground(oldUpper, oldWork)
	return nil
}

// backOut undoes a switch to the next generation whose view could not be
// shown: the old view still is, so the record goes back to naming it and
// its lease — else a restart would take its upperdir, where writes go on,
// for an old generation's and remove it — with what was carried moved
// back. The Store's lease goes back too, unless landed: the switch was to
// the Workspace's own commit, which landed, and which it no longer counts
// (see follow). Callers hold w.mu.
func (w *workspace) backOut(oldUpper, oldLease string, cr *carry, landed bool) {
	newUpper, newWork := w.upper(), w.work()
	if cr != nil {
		mergeBack(newUpper, oldUpper)
	}
	w.rec.Gen--
	if landed {
		w.unfollowed = w.rec.lease()
	}
	w.rec.Lease = oldLease
	if landed {
		w.rec.Commits--
	} else if err := w.d.s.SetLease(w.rec.ID, w.rec.Branch, w.d.id, w.rec.lease()); err != nil {
		w.logf("back on generation %d after a failed switch, but its lease: %v", w.rec.Gen, err)
	}
	if err := w.rec.save(w.dir()); err != nil {
		w.logf("back on generation %d after a failed switch, but its record: %v", w.rec.Gen, err)
	}
	// What was carried and could not go back (a path the old upperdir
	// has again) is kept aside, as a restart would keep it, not removed.
	if aside, _ := keepAside(newUpper); aside != "" {
		w.logf("entries carried to generation %d could not go back; kept at %s", w.rec.Gen+1, aside)
	}
	// The next view takes these names again, maybe before the remover
	// gets to them.
	w.trash(newUpper, newWork)
}

// makeDirs makes the current generation's upper and work directories,
// empty: any there are a crash's leftovers (see freshDirs).
func (w *workspace) makeDirs() error {
	return w.freshDirs(w.upper(), w.work())
}

// switchOverlay shows the overlay of the current lease and directories,
// next if it is not nil, and saves the record beside that. An error is
// the show's: the view is as it was, for the caller to back out. Once the
// new view is shown, commands write to its upperdir, so a record that
// could not be saved (a full disk, an I/O error) is logged, not backed
// out of: the stale one names the old generation, whose upperdir the
// caller removes, and a restart takes the new one up (adoptMovedUpper).
func (w *workspace) switchOverlay(next *nextView) error {
	saved := make(chan error, 1)
	go func() { saved <- w.rec.save(w.dir()) }()
	err := w.show(next)
	if serr := <-saved; serr != nil && err == nil {
		w.logf("shows generation %d, but its record could not be saved: %v", w.rec.Gen, serr)
	}
	return err
}

// show mounts the overlay of the current lease and directories and makes
// it the Workspace's view, at the host path and in the holder's
// namespace; next, if not nil, is that overlay mounted already, its Slot
// not bound yet. The host path goes first, with the view it had set
// aside, and the namespace last: once that shows the new view, commands
// may write to its upperdir, so no step may fail after it. A failure
// before puts the old view back at the host path, and the caller backs
// out of a switch that did not happen. The views it replaces, if any, are
// unmounted in the background (holder.attach, Daemon.unmountAside).
func (w *workspace) show(next *nextView) error {
	mfd, shown, err := w.mountView(next)
	if err != nil {
		return err
	}
	defer unix.Close(mfd)
	host := w.hostPath()
	aside, err := w.d.setAside(host)
	if err != nil {
		return err
	}
	if err = failpoint(FailpointHostPath); err == nil {
		if err = unix.MoveMount(mfd, "", unix.AT_FDCWD, host, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			err = fmt.Errorf("attach overlay at %s: %w", host, err)
		}
	}
	if err == nil {
		if err = failpoint(FailpointNamespace); err == nil {
			err = w.holder.bindDetached(mfd, w.rec.Path)
		}
	}
	if err != nil {
		w.d.putBack(aside, host)
		return err
	}
	w.d.unmountAside(aside)
	w.shown.Store(shown)
	return nil
}

// mountView mounts the overlay of the current lease and directories,
// detached, or binds next's Slot to the lease. It returns the detached
// mount, which the caller closes, and the data layer's tick it was made
// at (for w.shown).
func (w *workspace) mountView(next *nextView) (int, int64, error) {
	if next == nil {
		shown := w.d.tick()
		mfd, err := overlayDetached(w.lower(), w.d.dataDir(), w.upper(), w.work())
		return mfd, shown, err
	}
	shown, err := next.bind(w.d, w.rec.lease())
	if err != nil {
		next.close()
		return -1, 0, err
	}
	mfd := next.mfd
	next.mfd = -1 // the caller's now
	return mfd, shown, nil
}

// Discard drops a Workspace's uncommitted changes; it keeps its lease.
// What a commit would leave out of the Store — ignored paths, FIFOs,
// sockets, devices — stays, as across a commit (carry), unless all is
// set.
func (d *Daemon) Discard(id string, all bool) (api.DiscardResult, error) {
	w, err := d.get(id)
	if err != nil {
		return api.DiscardResult{}, err
	}
	w.mu.Lock()
	var cr *carry
	ended := 0
	if err = w.ended(); err == nil && w.holder != nil {
		if ended = w.d.reaper.running(w.holder.ns); ended > 0 {
			w.d.reaper.killNow(w.holder.ns)
		}
	}
	if err == nil {
		// What its last commit landed, should it not have followed it,
		// is not the discard's to drop: it moves onto that Commit first.
		_, err = w.catchUp()
	}
	if err == nil && !all {
		cr, err = w.prepareDiscardCarry()
	}
	if err == nil {
		prev := w.rec.Unsettled
		w.rec.Unsettled = nil // nothing of this Workspace's is left there; saved with the remount
		if err = w.remount(w.upper(), w.work(), cr); err != nil {
			w.rec.Unsettled = prev
		}
	}
	w.mu.Unlock()
	if err != nil {
		return api.DiscardResult{}, fmt.Errorf("discard %s: %w", id, err)
	}
	d.metrics.discards.Add(1)
	res := api.DiscardResult{Workspace: w.describe(), Kept: []api.UncommittedPath{}, Dropped: []api.UncommittedPath{}, EndedCommands: ended}
	if cr != nil {
		res.Kept = append(res.Kept, cr.kept...)
		res.Dropped = append(res.Dropped, cr.dropped...)
	}
	return res, nil
}

// prepareDiscardCarry finds what a discard keeps (see prepareCarry): the
// entries capture would leave out, found without reading a file. Callers
// hold w.mu.
func (w *workspace) prepareDiscardCarry() (*carry, error) {
	c, err := w.captureIfAny(publish.CaptureUncommitted)
	if c == nil || err != nil {
		return nil, err
	}
	// The lower layer stays, but a renamed directory's source shows again
	// once the discard drops its whiteout, and overlayfs will not show
	// two directories over one lower one (ESTALE): renamed directories
	// are copied up whole, as for a commit.
	return w.prepareCarry(c, w.rec.lease()), nil
}

// End unmounts a Workspace, removes its upperdir and releases its Lease
// (store.DropLeaseSoon);
// processes still running in it are killed. A Workspace with uncommitted
// changes is refused unless discard is set. A Workspace the daemon could
// not restore at its start is removed for good with discard, and refused
// without (endUnrestored).
func (d *Daemon) End(id string, discard bool) error {
	if ok, err := d.endUnrestored(id, discard); ok {
		return err
	}
	w, err := d.get(id)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.ended(); err != nil {
		return err // by another end meanwhile
	}
	if !discard {
		// What its last commit landed, should it not have followed it,
		// is not pending: it moves onto that Commit first.
		if _, err := w.catchUp(); err != nil {
			return fmt.Errorf("end %s: %w", id, err)
		}
		pending, err := w.pending()
		if err != nil {
			return fmt.Errorf("end %s: %w", id, err)
		}
		if len(pending) > 0 {
			return fmt.Errorf("end %s: %w: %s; commit them, or end with discard (ws end --discard, ?discard=1)", id, ErrDirty, summarize(pending))
		}
	}
	nv := w.takeNext()
	err = w.detach()
	// Not a Workspace any more, even if removal lags. A rename, not an
	// unlink: on a filesystem mounted with discard, freeing the file's
	// block waits behind the discards of removals under way, such as the
	// upperdir the last commit left (32 MiB of them: 5–45 ms).
	os.Rename(filepath.Join(w.dir(), "state.json"), filepath.Join(w.dir(), endedMarker))
	dirs := []string{w.dir(), w.hostPath()}
	if nv == nil {
		removeInBackground(dirs...)
	} else {
		// The view a command's start began to mount is unmounted after the
		// reply, and the directories go once it is; Close waits for it
		// before it unmounts the Store's FUSE mount, which it stacks on.
		d.retiring.Add(1)
		go func() {
			defer d.retiring.Done()
			nv.unmount()
			removeInBackground(dirs...)
		}()
	}
	// With the next write: a crash before it leaves the Lease to the next
	// start, which releases Leases it has no Workspace for.
	err = errors.Join(err, d.s.DropLeaseSoon(id))
	// Out of the table last: a Close that took its list before this waits
	// for the end (w.mu), and one after finds everything above done — the
	// holder stopped, the unmounts and removals it waits for counted.
	d.mu.Lock()
	delete(d.ws, id)
	d.mu.Unlock()
	d.metrics.ended.Add(1)
	return err
}

func summarize(paths []string) string {
	if len(paths) <= 5 {
		return fmt.Sprintf("%d changed: %v", len(paths), paths)
	}
	return fmt.Sprintf("%d changed: %v and %d more", len(paths), paths[:5], len(paths)-5)
}

// systemDirs are what commands need of the system: a Workspace may not be
// mounted over one of them, nor over a directory below one that holds
// something (/usr/bin), nor anywhere inside the kernel's own. A new
// directory below one (/usr/src/app, as container images use) hides
// nothing.
var systemDirs = []string{"/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run", "/sbin", "/sys", "/tmp", "/usr", "/var"}

// systemPath returns the system directory a Workspace at p would hide, or
// "" if none. p is looked at as it resolves (symlinks and all), and must
// be a directory if it exists.
func systemPath(p string) string {
	if real, err := filepath.EvalSymlinks(p); err == nil {
		if fi, err := os.Stat(real); err == nil && !fi.IsDir() {
			return p + ", which is not a directory"
		}
		if real != p {
			if sys := systemPath(real); sys != "" {
				return sys + " (through a symlink)"
			}
		}
	}
	for _, d := range systemDirs {
		if p == d {
			return d
		}
	}
	for _, d := range []string{"/proc", "/sys", "/dev"} {
		if strings.HasPrefix(p, d+"/") {
			return d + " (below it)"
		}
	}
	for _, d := range systemDirs {
		if strings.HasPrefix(p, d+"/") && d != "/tmp" && !strings.HasPrefix(p, "/var/tmp/") {
			if f, err := os.Open(p); err == nil {
				names, _ := f.Readdirnames(1)
				f.Close()
				if len(names) > 0 {
					return p + ", which holds files"
				}
			}
		}
	}
	return ""
}
