package fusefs

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"

	"github.com/layerfs/layerfs/lowerfs"
	"github.com/layerfs/layerfs/store"
)

// errnoTable maps errors that are answers, not damage, to their errno.
var errnoTable = []struct {
	err   error
	errno syscall.Errno
}{
	{lowerfs.ErrNotExist, syscall.ENOENT},
	{store.ErrNotFound, syscall.ENOENT},
	{store.ErrBadName, syscall.ENOENT},
	{store.ErrBadPath, syscall.ENOENT},
	{store.ErrAmbiguous, syscall.ENOENT},
	{lowerfs.ErrNotDir, syscall.ENOTDIR},
	{lowerfs.ErrIsDir, syscall.EISDIR},
	{lowerfs.ErrNotSymlink, syscall.EINVAL},
	{lowerfs.ErrInvalid, syscall.EINVAL},
	{context.Canceled, syscall.EINTR},
}

// errno turns err, met at node n (and child name, when not ""), into an
// errno. Unreadable objects and unknown errors become EIO and are logged
// with the path; they are checked first, so a missing object is never
// ENOENT.
func (fsys *fileSystem) errno(err error, n *fs.Inode, name string) syscall.Errno {
	if err == nil {
		return 0
	}
	if !errors.Is(err, lowerfs.ErrUnreadable) {
		for _, e := range errnoTable {
			if errors.Is(err, e.err) {
				return e.errno
			}
		}
	}
	fsys.logDamage(err, nodePath(n, name))
	return syscall.EIO
}

// nodePath is n's path below the mount root, with name appended.
func nodePath(n *fs.Inode, name string) string {
	p := "/" + n.Path(nil)
	if name != "" {
		if p != "/" {
			p += "/"
		}
		p += name
	}
	return p
}

// logDamage logs an EIO once per error text and logEvery, so a corrupt
// chunk that the kernel's read-ahead keeps asking for does not flood the
// log.
func (fsys *fileSystem) logDamage(err error, path string) {
	var oe *lowerfs.ObjectError
	what := "error"
	if errors.As(err, &oe) {
		what = "unreadable " + oe.Kind.String() + " " + oe.ID.String()
	}
	if fsys.limiter.allow(what + path) {
		fsys.log.Printf("EIO at %s: %s: %v", path, what, err)
	}
}

const logEvery = 10 * time.Second

// limiter allows a key at most once per logEvery.
type limiter struct {
	mu   sync.Mutex
	last map[string]time.Time
}

func (l *limiter) allow(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if t, ok := l.last[key]; ok && now.Sub(t) < logEvery {
		return false
	}
	if l.last == nil || len(l.last) > 1000 {
		l.last = map[string]time.Time{}
	}
	l.last[key] = now
	return true
}
