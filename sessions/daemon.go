package sessions

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/fusefs"
	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// DefaultMaxWorkspaces is the default cap on live Workspaces.
const DefaultMaxWorkspaces = 256

// Config sets up a Daemon.
type Config struct {
	// Store is the open Store the daemon serves; it stays open until Close.
	Store *store.Store
	// StateDir holds the FUSE mount, the Workspaces' upper and work
	// directories, their mount points and their records. It must be on a
	// local filesystem overlayfs accepts as upperdir (ext4, xfs, btrfs,
	// tmpfs).
	StateDir string
	// MaxWorkspaces caps live Workspaces; 0 means DefaultMaxWorkspaces.
	MaxWorkspaces int
	// Self was the layerfs binary the daemon ran as namespace holder.
	// Holders are threads of the daemon now; it is ignored.
	Self string
	// Volume says where the Workspaces' directories go (VolumeAuto,
	// VolumeOff), and VolumeSize how big an XFS image made for them is
	// (0: DefaultVolumeSize); see volume.go.
	Volume     string
	VolumeSize int64
	// FUSE tunes the Store's FUSE mount.
	FUSE   fusefs.Options
	Logger *log.Logger
}

// Daemon serves Workspaces of one Store.
type Daemon struct {
	cfg     Config
	s       *store.Store
	fuse    *fusefs.Server
	holders *holderPool
	spares  *spares
	reaper  reaper
	// retiring counts replaced host views still being unmounted (unmountAside).
	retiring sync.WaitGroup
	// asides holds empty directories in mnt/.retired for setAside to move
	// views to, each left by a view's finished unmount: making one on the
	// state directory's filesystem took ~0.12 ms of every commit's reply.
	asides chan string
	// warming counts reads ahead of committed big files (warm.go) and
	// their lookups ahead in Workspaces' views (hot.go).
	warming sync.WaitGroup
	hot     hotPaths
	log     *log.Logger
	id      string // how leases name this daemon
	// volume is the XFS image's mount point, if the daemon mounted one
	// (volume.go); data is the data layer, if the Workspaces' filesystem
	// clones files.
	volume string
	data   *dataLayer
	// lock holds the state directory's lock (lockStateDir) until the
	// daemon is done with it.
	lock *os.File

	mu      sync.Mutex
	ws      map[string]*workspace
	pending int // Workspaces being created: they count against the cap
	// settled is signalled (on mu) when pending drops to 0: Close waits
	// for the creates under way, whose Workspaces are not in ws yet.
	settled sync.Cond
	closed  bool
	metrics metrics
	// unrestored holds the Workspaces restore could not bring back, by
	// id (see unrestore).
	unrestored map[string]api.Unrestored
}

// Start mounts the Store, restores the Workspaces recorded in the state
// directory, and returns a Daemon ready to serve.
func Start(cfg Config) (*Daemon, error) {
	if cfg.MaxWorkspaces <= 0 {
		cfg.MaxWorkspaces = DefaultMaxWorkspaces
	}
	if cfg.Logger == nil {
		cfg.Logger = log.New(os.Stderr, "layerfs daemon: ", log.LstdFlags)
	}
	abs, err := filepath.Abs(cfg.StateDir)
	if err == nil {
		err = os.MkdirAll(abs, 0o700)
	}
	if err == nil {
		// The kernel names mounts and loop devices' files by their real
		// paths: so must the daemon, to find them again.
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return nil, err
	}
	cfg.StateDir = abs
	if err := RescueWedged(abs, cfg.Logger); err != nil {
		return nil, err
	}
	lock, err := lockStateDir(abs)
	if err != nil {
		return nil, err
	}
	inst, err := stateInstance(abs)
	if err == nil {
		// Every Workspace takes a lease, a write: say so now, not at
		// each create.
		if werr := cfg.Store.Writable(); werr != nil {
			err = fmt.Errorf("a daemon needs a Store it can write: %w", werr)
		}
	}
	if err == nil {
		err = checkStateStore(abs, cfg.Store.Path(), cfg.Logger)
	}
	if err != nil {
		lock.Close()
		return nil, err
	}
	host, _ := os.Hostname()
	d := &Daemon{cfg: cfg, s: cfg.Store, log: cfg.Logger, ws: map[string]*workspace{}, asides: make(chan string, 8),
		id: fmt.Sprintf("%s:%d:%s@%s", host, os.Getpid(), abs, inst), lock: lock}
	d.settled.L = &d.mu
	d.spares = &spares{d: d}
	if err := d.setup(); err != nil {
		d.teardown()
		return nil, err
	}
	d.holders = newHolderPool(cfg.StateDir, 1) // and the spare holds another
	if err := d.restore(); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

func (d *Daemon) dir(parts ...string) string {
	return filepath.Join(append([]string{d.cfg.StateDir}, parts...)...)
}

// setup cleans what a crashed daemon left and mounts the Store.
func (d *Daemon) setup() error {
	// Commands a crashed daemon left running would go on writing into
	// the Workspaces it is about to bring back: killed first.
	if cg, err := openCgroups(d.cfg.StateDir); err != nil {
		d.log.Printf("no cgroups for commands (%v): the processes they leave are found by mount namespace", err)
	} else {
		d.reaper.cg = cg
	}
	// Then: a crashed daemon's FUSE mount answers ENOTCONN, so that
	// even making sure its mount point exists fails while it is there.
	if err := d.cleanStaleMounts(); err != nil {
		return err
	}
	for _, p := range []string{d.dir("lower"), d.dir("mnt")} {
		if err := os.MkdirAll(p, 0o700); err != nil {
			return err
		}
	}
	if err := d.setupVolume(); err != nil {
		return err
	}
	// The host paths' parent, a private mount, so that setAside can move
	// mounts out of it whatever the propagation of the filesystem below.
	if err := unix.Mount(d.dir("mnt"), d.dir("mnt"), "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s: %w", d.dir("mnt"), err)
	}
	if err := unix.Mount("", d.dir("mnt"), "", unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make %s private: %w", d.dir("mnt"), err)
	}
	if err := os.MkdirAll(d.dir("mnt", retiredDir), 0o700); err != nil {
		return err
	}
	// Places a crash left before their mount was gone (cleanStaleMounts
	// has detached it): rmdir, which never removes what is inside.
	if left, err := os.ReadDir(d.dir("mnt", retiredDir)); err == nil {
		for _, e := range left {
			os.Remove(d.dir("mnt", retiredDir, e.Name()))
		}
	}
	opts := d.cfg.FUSE
	opts.AllCommits = true
	if d.data != nil {
		opts.DataRedirect = d.data.redirect
	}
	srv, err := fusefs.Mount(fusefs.Config{Store: d.s, Mountpoint: d.dir("lower"), Source: d.s.Path(),
		Options: opts, Logger: d.log})
	if err != nil {
		return fmt.Errorf("mount the store: %w", err)
	}
	d.fuse = srv
	// Every mount namespace made from ours from now on (other daemons'
	// holders, anyone's unshare) copies this mount. Shared, the copies
	// that stay shared or slave go away when we unmount it, rather than
	// keep the FUSE server from finishing.
	if err := unix.Mount("", d.dir("lower"), "", unix.MS_SHARED, ""); err != nil {
		return fmt.Errorf("share %s: %w", d.dir("lower"), err)
	}
	return nil
}

// cleanStaleMounts detaches every mount under the state directory: after a
// crash they are overlays over a FUSE server that is gone.
func (d *Daemon) cleanStaleMounts() error {
	mounts, err := mountsUnder(d.cfg.StateDir)
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if m == d.cfg.StateDir {
			continue // a filesystem of its own for the state (a disk, a tmpfs): not ours
		}
		if m == d.dir("ws") {
			continue // the Workspaces' volume, with their upperdirs: kept (volume.go)
		}
		if err := unmount(m); err != nil {
			return fmt.Errorf("clean stale mount: %w", err)
		}
		d.log.Printf("detached stale mount %s", m)
	}
	return nil
}

// restore brings back the Workspaces recorded in the state directory.
func (d *Daemon) restore() error {
	entries, err := os.ReadDir(d.dir("ws"))
	if err != nil {
		return err
	}
	// The Store's Leases, read once: resume looks for its own in them.
	leases, err := d.s.Leases()
	if err != nil {
		return err
	}
	stored := make(map[string]object.ID, len(leases))
	for _, l := range leases {
		stored[l.ID] = l.Commit
	}
	// The directories removed here, in the background: their Leases go
	// too, whether or not the removal is done by then.
	gone := map[string]bool{}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue // the data layer (datalayer.go)
		}
		dir := d.dir("ws", e.Name())
		if isEnded(dir) { // even with a record, should one be left beside the marker
			removeInBackground(dir)
			gone[e.Name()] = true
			continue
		}
		rec, err := loadRecord(dir)
		if err != nil && (isSpare(dir) || errors.Is(err, os.ErrNotExist)) {
			// Made ahead of need and never used, or a create a crash cut
			// short before it saved the record (which every Workspace
			// has from then on until its end): nobody was told of it.
			removeInBackground(dir)
			os.Remove(d.dir("mnt", e.Name())) // its host path, unmounted (cleanStaleMounts): rmdir only
			gone[e.Name()] = true
			continue
		}
		if err != nil {
			d.unrestore(e.Name(), err)
			continue
		}
		w := &workspace{d: d, rec: *rec}
		if err := w.resume(stored[rec.ID]); err != nil {
			// Not in d.ws, so Close would not see them: its holder, whose
			// namespace holds a clone of its overlay, would keep the
			// Store's FUSE mount alive.
			w.detach()
			d.unrestore(rec.ID, err)
			continue
		}
		w.describe() // for List while a first commit holds it
		d.ws[rec.ID] = w
		d.log.Printf("restored workspace %s (branch %s, lease %.12s)", rec.ID, rec.Branch, w.rec.Lease)
	}
	return d.dropOrphanLeases(gone)
}

// unrestore notes that the Workspace of directory ws/id could not be
// restored, for err: the daemon starts without it rather than not at
// all, which would leave every other Workspace unusable too. Its
// directory — record, upperdirs, uncommitted changes — stays as it is,
// and its Lease too (dropOrphanLeases), for the next start to try again;
// Health lists it, and requests for it say why it is not there (get).
func (d *Daemon) unrestore(id string, err error) {
	dir := d.dir("ws", id)
	d.log.Printf("workspace %s NOT restored: %v; its directory %s and its Lease are kept as they are, and the next start tries again", id, err, dir)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.unrestored == nil {
		d.unrestored = map[string]api.Unrestored{}
	}
	d.unrestored[id] = api.Unrestored{ID: id, Dir: dir, Error: err.Error()}
}

// dropOrphanLeases releases the Leases that a daemon of this state
// directory — the same host, path and instance (stateInstance) — took for
// Workspaces it has no record of. A crash between taking a create's Lease
// and saving its record, or between an end's retiring the record and
// releasing the Lease, left them pinning their Commits for good. Restored
// Workspaces hold theirs again (resume); a Workspace directory that
// could not be restored (unrestore) keeps its Lease. gone names the directories
// restore is removing (their removal may still be under way).
func (d *Daemon) dropOrphanLeases(gone map[string]bool) error {
	leases, err := d.s.Leases()
	if err != nil {
		return err
	}
	ours := holderHome(d.id)
	for _, l := range leases {
		if holderHome(l.Holder) != ours || d.ws[l.ID] != nil {
			continue
		}
		dir := d.dir("ws", l.ID)
		if _, err := os.Stat(dir); err == nil && !isEnded(dir) && !gone[l.ID] {
			continue // not restored (unrestore): kept for the next start, or its owner, to see to
		}
		if err := d.s.DropLease(l.ID); err != nil {
			return err
		}
		d.log.Printf("released lease %s on %.12s: no such workspace here", l.ID, l.Commit)
	}
	return nil
}

// ErrOtherStore: a state directory started with another Store than the
// one whose Workspaces it holds.
var ErrOtherStore = errors.New("the state directory belongs to another Store")

// checkStateStore records, the first time, which Store the state
// directory's Workspaces are of, and refuses another one after: their
// leases, Commits and records mean nothing there, and restoring them would
// write leases naming missing Commits into it. A recorded Store file that
// no longer exists is taken to have moved, and the new path recorded.
func checkStateStore(dir, store string, log *log.Logger) error {
	p := filepath.Join(dir, "store")
	abs, err := filepath.Abs(store)
	if err == nil {
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			abs = real
		}
	}
	if b, err := os.ReadFile(p); err == nil {
		was := strings.TrimSpace(string(b))
		if was == abs {
			return nil
		}
		switch _, err := os.Stat(was); {
		case !holdsWorkspaces(dir):
			log.Printf("the state directory was %s's, and holds no Workspaces: now %s's", was, abs)
		case err == nil:
			return fmt.Errorf("%w: %s holds the Workspaces of %s, not %s: start the daemon with that Store, or give this one a state directory of its own", ErrOtherStore, dir, was, abs)
		case errors.Is(err, os.ErrNotExist):
			log.Printf("the Store %s is gone; taking %s as it, moved", was, abs)
		default:
			return fmt.Errorf("%w: %s holds the Workspaces of %s, which cannot be looked at (%v), not %s", ErrOtherStore, dir, was, err, abs)
		}
	}
	if err := os.WriteFile(p, []byte(abs+"\n"), 0o600); err != nil {
		return fmt.Errorf("state directory: record the Store: %w", err)
	}
	return nil
}

// holdsWorkspaces reports whether the state directory has Workspace
// records (ws/<id>/state.json); ws/ itself may be the volume, not mounted
// yet, and then its records are not seen here: it counts as holding them
// if the volume's image is there.
func holdsWorkspaces(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, volumeImage)); err == nil {
		return true
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "ws", "ws-*", "state.json"))
	return len(matches) > 0
}

// stateInstance returns the state directory's instance name, made at
// random the first time: with the host and path it tells this state
// directory's Leases from those of another with the same path on a host
// of the same name (two containers, say) sharing the Store.
func stateInstance(dir string) (string, error) {
	p := filepath.Join(dir, "instance")
	if b, err := os.ReadFile(p); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	}
	var r [8]byte
	rand.Read(r[:])
	inst := hex.EncodeToString(r[:])
	if err := os.WriteFile(p, []byte(inst+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("state directory instance: %w", err)
	}
	return inst, nil
}

// holderHome is a daemon's Lease holder (Daemon.id, host:pid:path@instance)
// without its process ID: which state directory the daemon served. A
// holder not of that form (another kind of writer's) has none: "".
func holderHome(holder string) string {
	parts := strings.SplitN(holder, ":", 3)
	if len(parts) != 3 {
		return ""
	}
	return parts[0] + ":" + parts[2]
}

// Close unmounts every Workspace and the Store, keeping the records: a
// later Start resumes them. Commands still running in Workspaces are
// killed. It does not close the Store.
func (d *Daemon) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	// No create starts from now on (reserve); those under way are waited
	// for, and their Workspaces detached with the others.
	for d.pending > 0 {
		d.settled.Wait()
	}
	// A copy: an end that found its Workspace before this still deletes
	// it from the table.
	ws := make([]*workspace, 0, len(d.ws))
	for _, w := range d.ws {
		ws = append(ws, w)
	}
	d.mu.Unlock()
	var errs []error
	for _, w := range ws {
		w.mu.Lock() // after a commit or end under way
		if w.ended() == nil {
			errs = append(errs, w.detach())
		}
		w.mu.Unlock()
	}
	d.spares.close()
	if d.holders != nil {
		d.holders.close()
	}
	d.reaper.close() // no command may keep an overlay, and so the Store's mount, alive
	janitor.waitIdle()
	errs = append(errs, d.teardown())
	return errors.Join(errs...)
}

func (d *Daemon) teardown() error {
	var errs []error
	d.retiring.Wait()
	for drained := false; !drained; {
		select {
		case aside := <-d.asides:
			os.Remove(aside)
		default:
			drained = true
		}
	}
	d.warming.Wait()
	if d.data != nil {
		d.data.close()
	}
	errs = append(errs, unmount(d.dir("mnt")))
	if d.fuse != nil {
		errs = append(errs, d.fuse.Unmount())
		d.fuse = nil
	}
	if d.volume != "" {
		errs = append(errs, unmountVolume(d.volume))
		d.volume = ""
	}
	if d.lock != nil {
		d.lock.Close() // lets the next daemon have the state directory
		d.lock = nil
	}
	return errors.Join(errs...)
}

// lockStateDir takes the state directory for this process: a second
// daemon on it would take the first's mounts for a crash's leftovers and
// detach them. The lock (flock on dir/daemon.lock) goes with the process,
// however it ends; the file names the last holder's pid, for the error.
func lockStateDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "daemon.lock"), os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the state directory: %w", err)
	}
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	// A daemon killed a moment ago holds it until its process is gone:
	// wait for that (up to five seconds), not for a live one.
	for i := 0; errors.Is(err, unix.EWOULDBLOCK) && i < 100 && holderDying(f); i++ {
		time.Sleep(50 * time.Millisecond)
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	}
	if err != nil {
		holder := lockHolder(f)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is in use by another daemon (pid %s); give this one a --state-dir of its own",
				ErrStateInUse, dir, holder)
		}
		return nil, fmt.Errorf("lock the state directory %s: %w", dir, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// holderDying reports whether the process the lock file names is gone or
// on its way out (a zombie, or exiting): one that holds the lock only
// until its exit completes.
func holderDying(f *os.File) bool {
	pid := lockPID(f)
	if pid <= 0 {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// state ppid pgrp session tty_nr tpgid flags ... after "pid (comm)"
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) < 7 {
		return false
	}
	const pfExiting = 0x4 // PF_EXITING: in do_exit
	flags, _ := strconv.ParseUint(fields[6], 10, 64)
	if fields[0] == "Z" || fields[0] == "X" || flags&pfExiting != 0 {
		return true
	}
	// Killed, but its first thread still in the kernel (waiting on a
	// FUSE request, say): SIGKILL pending.
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return true
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, _ := strings.Cut(line, ":")
		if k == "SigPnd" || k == "ShdPnd" {
			if mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && mask&(1<<(unix.SIGKILL-1)) != 0 {
				return true
			}
		}
	}
	return false
}

// Health reports the daemon's status.
func (d *Daemon) Health() api.Health {
	d.mu.Lock()
	h := api.Health{OK: !d.closed, Store: d.s.Path(), Workspaces: len(d.ws), Max: d.cfg.MaxWorkspaces, FUSE: d.dir("lower")}
	for _, u := range d.unrestored {
		h.Unrestored = append(h.Unrestored, u)
	}
	d.mu.Unlock()
	sort.Slice(h.Unrestored, func(i, j int) bool { return h.Unrestored[i].ID < h.Unrestored[j].ID })
	if !h.OK {
		h.Problem = "shutting down"
		return h
	}
	// Every Workspace's lower layer is in it: unmounted from outside, no
	// create, commit or copy-up works any more.
	var st unix.Statfs_t
	if err := unix.Statfs(h.FUSE, &st); err != nil || st.Type != unix.FUSE_SUPER_MAGIC {
		h.OK, h.Problem = false, fmt.Sprintf("the Store's FUSE mount at %s is gone (unmounted from outside?): restart the daemon", h.FUSE)
	}
	return h
}

// List describes every Workspace, by id, without waiting for a commit,
// discard or end under way (see listed).
func (d *Daemon) List() []api.Workspace {
	d.mu.Lock()
	ws := make([]*workspace, 0, len(d.ws))
	for _, w := range d.ws {
		ws = append(ws, w)
	}
	d.mu.Unlock()
	out := make([]api.Workspace, len(ws))
	for i, w := range ws {
		out[i] = w.listed()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (d *Daemon) get(id string) (*workspace, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	w, ok := d.ws[id]
	if u, was := d.unrestored[id]; !ok && was {
		return nil, fmt.Errorf("workspace %q: %w: the daemon could not restore it at its start (%s); its files are kept in %s, and the next start tries again (or end it with discard, ws end --discard, to remove it for good)", id, ErrNotFound, u.Error, u.Dir)
	}
	if !ok {
		return nil, fmt.Errorf("workspace %q: %w", id, ErrNotFound)
	}
	return w, nil
}

// reserve takes a place under the cap for a Workspace being created.
func (d *Daemon) reserve() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	if len(d.ws)+d.pending >= d.cfg.MaxWorkspaces {
		return fmt.Errorf("%w: %d live Workspaces is the configured maximum (--max-workspaces); end one first",
			ErrCap, d.cfg.MaxWorkspaces)
	}
	d.pending++
	return nil
}

func (d *Daemon) settle(w *workspace) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pending--; d.pending == 0 {
		d.settled.Broadcast()
	}
	if w != nil {
		d.ws[w.rec.ID] = w
	}
}
