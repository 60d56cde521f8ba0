package publish

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/extents"
)

// A file may change while capture reads it: a command a commit with
// allow_running left at work, or an editor writing through the
// Workspace's host path. What capture read is then no version the file
// ever held — a shrunk file even ends before the size capture took, and
// its reads come up short. Capture tells by the file's size, mtime and
// ctime before and after it read the file, and by what the read found,
// and fails the commit with ErrChanged rather than store a torn version:
// nothing is published, and the next commit reads the file as it is then.
// A dry capture (CaptureUpperDry: what is pending?) takes what it read,
// unless the read failed.
// Bytes read from a clone of the file (see DataLayer) were read from a
// copy nothing writes, whatever the file went through meanwhile.

// ErrChanged says a file changed while capture read it, so that no one
// version of it could be stored. Committing again takes it as it is then.
var ErrChanged = errors.New("the file changed while the commit read it (a command or an editor was writing it): commit again")

// pathHook is a test's function that capture calls with a path at one
// point of its work (SetAfterStatForTest, SetAfterLstatForTest).
type pathHook struct {
	fn atomic.Pointer[func(path string)]
}

func (h *pathHook) set(fn func(path string)) {
	if fn == nil {
		h.fn.Store(nil)
		return
	}
	h.fn.Store(&fn)
}

func (h *pathHook) call(path string) {
	if fn := h.fn.Load(); fn != nil {
		(*fn)(path)
	}
}

// afterStat is called with the path of each upper file capture reads,
// between the stat it compares with and the first read; afterLstat with
// the path of each upper entry capture looks at, between its lstat and
// its open.
var afterStat, afterLstat pathHook

// SetAfterStatForTest makes capture call fn with the path of each upper
// file it reads, after it took the file's size and before it reads it,
// so that a test can change the file there; a nil fn clears it. For
// tests only.
func SetAfterStatForTest(fn func(path string)) { afterStat.set(fn) }

// SetAfterLstatForTest makes capture call fn with the path of each upper
// entry, after it took the entry's type and before it opens it, so that a
// test can replace it there; a nil fn clears it. For tests only.
func SetAfterLstatForTest(fn func(path string)) { afterLstat.set(fn) }

// replaced turns the error of opening an entry of the kind its lstat
// gave (a file, a directory) into ErrChanged when what is there now is
// of another kind — a symlink (ELOOP: not followed), a file where a
// directory was (ENOTDIR) — put in its place meanwhile. A gone entry is
// passed over (vanished).
func replaced(path string, err error) error {
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return fmt.Errorf("%s: %w", path, ErrChanged)
	}
	return vanished(err)
}

// checkUnchanged turns the outcome of reading upper file f — content and
// err — into ErrChanged if f's size, mtime or ctime is no longer before's,
// or content's size is not the size before gave (a read that ended early
// or went on past it). Otherwise it returns err as it is.
func checkUnchanged(f *os.File, before *unix.Stat_t, content extents.File, err error) error {
	var now unix.Stat_t
	if serr := unix.Fstat(int(f.Fd()), &now); serr != nil {
		if err != nil {
			return err
		}
		return fmt.Errorf("fstat: %w", serr)
	}
	if now.Size != before.Size || now.Mtim != before.Mtim || now.Ctim != before.Ctim ||
		err == nil && content.Size != before.Size {
		return ErrChanged
	}
	return err
}
