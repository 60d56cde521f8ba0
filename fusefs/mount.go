package fusefs

import (
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// maxRead is the largest READ request: 1 MiB, 256 pages, the most Linux
// grants by default.
const maxRead = 1 << 20

// readAheadMax is the kernel's read-ahead for a mount: 16 READs. Against
// 4 (4 MiB), a sequential read of 1 GiB through the mount went ~10%
// faster, with ~5% less CPU: more requests in flight keep lowerfs's
// read-ahead workers and the reader busy at once. The window only grows
// that far for a long sequential read.
const readAheadMax = 16 * maxRead

// Config says what to mount where.
type Config struct {
	// Store serves the mount; it must stay open until the Server is done.
	Store *store.Store
	// Commit is what a single-ref mount shows. Ignored with
	// Options.AllCommits.
	Commit object.ID
	// Mountpoint is an existing directory.
	Mountpoint string
	// Source is the mount's source in /proc/mounts, e.g. "/p.layerfs#main".
	Source  string
	Options Options
	// Logger receives damage reports (EIO) and lifecycle messages; nil
	// means the standard logger.
	Logger *log.Logger
}

// Server is a mounted, serving filesystem.
type Server struct {
	srv  *fuse.Server
	fsys *fileSystem
	root fs.InodeEmbedder
	mnt  string
	log  *log.Logger
	done chan struct{}
}

// Mount mounts cfg's Commit (or all Commits) read-only at cfg.Mountpoint
// and serves it until unmounted. A stale mount left there by a server that
// died is detached first; a live layerfs mount there is ErrMounted.
func Mount(cfg Config) (*Server, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = log.Default()
	}
	mnt, err := filepath.Abs(cfg.Mountpoint)
	if err != nil {
		return nil, fmt.Errorf("mount at %s: %w", cfg.Mountpoint, err)
	}
	unlock := lockMountpoint(mnt)
	defer unlock()
	if err := prepareMountpoint(mnt, logger); err != nil {
		return nil, fmt.Errorf("mount at %s: %w", mnt, err)
	}
	mnt = resolveMountpoint(mnt) // where mount(2) puts it, as the mount table names it
	if err := checkStoreOutside(cfg.Store.Path(), mnt); err != nil {
		return nil, fmt.Errorf("mount at %s: %w", mnt, err)
	}
	fsys := newFileSystem(cfg.Store, cfg.Options, logger)
	root, err := newRoot(fsys, cfg)
	if err != nil {
		fsys.close()
		return nil, fmt.Errorf("mount at %s: %w", mnt, err)
	}
	srv, err := serveFUSE(mnt, root, fsOptions(cfg, logger))
	if err != nil {
		fsys.close()
		return nil, fmt.Errorf("mount at %s: %w", mnt, err)
	}
	tuneReadAhead(mnt)
	s := &Server{srv: srv, fsys: fsys, root: root, mnt: mnt, log: logger, done: make(chan struct{})}
	go s.serve()
	return s, nil
}

func (s *Server) serve() {
	s.srv.Wait()
	s.fsys.close()
	close(s.done)
}

// serveFUSE mounts root at mnt and starts serving it, as fs.Mount does,
// with OPENDIR handled by noOpendir.
func serveFUSE(mnt string, root fs.InodeEmbedder, opts *fs.Options) (*fuse.Server, error) {
	raw := &noOpendir{RawFileSystem: fs.NewNodeFS(root, opts)}
	srv, err := fuse.NewServer(raw, mnt, &opts.MountOptions)
	if err != nil {
		return nil, err
	}
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		srv.Unmount()
		return nil, err
	}
	return srv, nil
}

func newRoot(fsys *fileSystem, cfg Config) (fs.InodeEmbedder, error) {
	if cfg.Options.AllCommits {
		return &commitsRoot{fsys: fsys}, nil
	}
	v, err := fsys.view(cfg.Commit)
	if err != nil {
		return nil, err
	}
	return newCommitDir(fsys, v), nil
}

// fsOptions sets up go-fuse for immutable content; see the package doc.
func fsOptions(cfg Config, logger *log.Logger) *fs.Options {
	ttl := cfg.Options.entryTimeout()
	return &fs.Options{
		MountOptions: fuse.MountOptions{
			FsName:               cfg.Source,
			Name:                 "layerfs",
			DirectMount:          true,
			DirectMountStrict:    true,
			DirectMountFlags:     syscall.MS_RDONLY | syscall.MS_NOSUID | syscall.MS_NODEV,
			Options:              append([]string{"default_permissions"}, cfg.Options.MountFlags...),
			AllowOther:           cfg.Options.AllowOther,
			MaxWrite:             maxRead,
			MaxBackground:        64,
			DisableXAttrs:        cfg.Options.DataRedirect == nil, // only overlayfs's metacopy xattrs exist
			DisableSplice:        true,                            // reads answer with chunk slices (writev), never a file descriptor
			IgnoreSecurityLabels: true,
			EnableSymlinkCaching: true,
			Debug:                cfg.Options.Debug,
			Logger:               logger,
		},
		EntryTimeout:    &ttl,
		AttrTimeout:     &ttl,
		NegativeTimeout: &ttl,
		NullPermissions: true,
		RootStableAttr:  &fs.StableAttr{Ino: 1},
		Logger:          logger,
	}
}

// Mountpoint is the absolute path mounted.
func (s *Server) Mountpoint() string { return s.mnt }

// Done is closed once the filesystem is unmounted and no longer served.
func (s *Server) Done() <-chan struct{} { return s.done }

// Wait blocks until the filesystem is unmounted, by Unmount or from outside.
func (s *Server) Wait() { <-s.done }

// unmountGrace bounds the wait for serving to stop after a successful
// unmount. It stops at once unless a copy of the mount lives on in another
// mount namespace (one made while it was mounted, with private
// propagation), which the unmount here does not reach.
const unmountGrace = 5 * time.Second

// Unmount unmounts and waits until serving stops. While files are in use
// (EBUSY) it detaches the mount lazily instead: it disappears from the
// namespace at once, and serving stops when the last user lets go. If
// copies of the mount in other namespaces keep it served past
// unmountGrace, it says so in the log and returns; they fail with ENOTCONN
// once this process exits.
func (s *Server) Unmount() error {
	err := unmountRetrying(s.mnt)
	lazy := errors.Is(err, unix.EBUSY)
	if lazy {
		s.log.Printf("%s is busy: detaching it; it goes away when its last user does", s.mnt)
		err = unix.Unmount(s.mnt, unix.MNT_DETACH)
	}
	if err != nil {
		// Unmounted from outside meanwhile: the serving loop ends once
		// the kernel drops the connection, which follows the unmount
		// (EINVAL: no longer a mount point) by a moment.
		wait := time.Duration(0)
		if errors.Is(err, unix.EINVAL) {
			wait = time.Second
		}
		select {
		case <-s.done:
			return nil
		case <-time.After(wait):
		}
		return fmt.Errorf("unmount %s: %w", s.mnt, err)
	}
	if lazy {
		<-s.done
		return nil
	}
	select {
	case <-s.done:
	case <-time.After(unmountGrace):
		s.log.Printf("%s is unmounted here but still mounted in another mount namespace; not waiting for it", s.mnt)
	}
	return nil
}

// unmountRetrying unmounts mnt, trying again for a moment while it is
// busy: the kernel may not have seen the last close yet.
func unmountRetrying(mnt string) error {
	var err error
	for try, delay := 0, 5*time.Millisecond; try < 5; try, delay = try+1, 2*delay {
		if err = unix.Unmount(mnt, 0); !errors.Is(err, unix.EBUSY) {
			return err
		}
		time.Sleep(delay)
	}
	return err
}

// lockMountpoint serializes mounts at mnt, from the check that nothing is
// mounted there until the mount is up: two started at once each found the
// place free and the second was stacked on the first. It takes an
// exclusive flock on the directory; a later mount that opens it opens the
// live mount's root instead, and its check refuses it. A mount point that
// cannot be opened (missing, stale) is not locked: the checks report it.
func lockMountpoint(mnt string) (unlock func()) {
	fd, err := unix.Open(mnt, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return func() {}
	}
	for unix.Flock(fd, unix.LOCK_EX) == unix.EINTR {
	}
	return func() { unix.Close(fd) }
}

// prepareMountpoint detaches a stale mount at mnt — one whose server died,
// so the kernel answers ENOTCONN — and refuses a live layerfs mount.
func prepareMountpoint(mnt string, logger *log.Logger) error {
	for stale(mnt) {
		if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("detach stale mount: %w", err)
		}
		logger.Printf("detached a stale mount at %s left by a server that died", mnt)
	}
	return checkMountpoint(mnt)
}

// checkMountpoint refuses a mount point that is missing (store.ErrNotFound),
// not a directory (store.ErrBadPath) or a live layerfs mount already
// (ErrMounted).
func checkMountpoint(mnt string) error {
	var st unix.Stat_t
	if err := unix.Stat(mnt, &st); errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("mount point %s does not exist: %w", mnt, store.ErrNotFound)
	} else if err != nil {
		return &os.PathError{Op: "stat", Path: mnt, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("mount point %s is not a directory: %w", mnt, store.ErrBadPath)
	}
	if m, ok := mountAt(resolveMountpoint(mnt)); ok && m.FSType == fsType {
		return fmt.Errorf("%w: %s is served from %s", ErrMounted, mnt, m.Source)
	}
	return nil
}

// checkStoreOutside refuses a mount point that holds the Store file
// (store.ErrBadPath): the mount would hide it, and the connections SQLite
// opens later, by path, would reach into the mount itself and fail (EIO).
func checkStoreOutside(storePath, mnt string) error {
	abs, err := filepath.Abs(storePath)
	if err != nil {
		return nil
	}
	rel, err := filepath.Rel(resolveMountpoint(mnt), resolveMountpoint(abs))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil
	}
	return fmt.Errorf("the Store %s is under mount point %s, which would hide it: %w", abs, mnt, store.ErrBadPath)
}

// resolveMountpoint returns mnt with its symlinks resolved, or mnt itself
// if they cannot be (a stale mount on the way answers ENOTCONN): mount(2)
// follows them, and the mount table shows where it landed.
func resolveMountpoint(mnt string) string {
	if real, err := filepath.EvalSymlinks(mnt); err == nil {
		return real
	}
	return mnt
}

// stale reports whether mnt is a FUSE mount whose server is gone. statfs
// always reaches the server (stat of the root may be answered from the
// kernel's cache), and a dead one's connection answers ENOTCONN.
func stale(mnt string) bool {
	var sfs unix.Statfs_t
	err := unix.Statfs(mnt, &sfs)
	return errors.Is(err, unix.ENOTCONN) || errors.Is(err, unix.ECONNABORTED)
}

// tuneReadAhead raises the kernel's read-ahead for the mount to
// readAheadMax, so sequential reads arrive as many large requests. It is
// best effort: without root or sysfs nothing changes.
func tuneReadAhead(mnt string) {
	var st unix.Stat_t
	if unix.Stat(mnt, &st) != nil {
		return
	}
	p := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(st.Dev), unix.Minor(st.Dev))
	os.WriteFile(p, []byte(fmt.Sprint(readAheadMax>>10)), 0)
}

// Unmount unmounts the layerfs mount at mountpoint, lazily when lazy is
// set (it then goes away when its last user does). A path that is not a
// layerfs mount is ErrNotMounted.
func Unmount(mountpoint string, lazy bool) error {
	mnt, err := filepath.Abs(mountpoint)
	if err != nil {
		return err
	}
	if m, ok := mountAt(mnt); !ok || m.FSType != fsType {
		return fmt.Errorf("unmount %s: %w", mnt, ErrNotMounted)
	}
	flags := 0
	if lazy {
		flags = unix.MNT_DETACH
	}
	for try := 0; ; try++ {
		err = unix.Unmount(mnt, flags)
		if !errors.Is(err, unix.EBUSY) || try == 3 {
			break
		}
		time.Sleep(time.Duration(try+1) * 20 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("unmount %s: %w", mnt, err)
	}
	return nil
}
