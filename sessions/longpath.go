package sessions

import (
	"errors"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/internal/longpath"
	"github.com/layerfs/layerfs/internal/ovl"
)

// The entries a commit carries, a discard keeps and a conflict's rebase
// rewrites are in the upperdir, or seen through the Workspace's view, at
// paths of up to 4095 bytes below them: the whole may be longer than
// PATH_MAX. These do what their namesakes in os and unix do, for a path
// of any length (internal/longpath). Errors of single-path operations
// are *fs.PathErrors naming the path, as os's are.

func lstatL(path string, st *unix.Stat_t) error {
	return longpath.At(path, "lstat", func(dir int, name string) error {
		return unix.Fstatat(dir, name, st, unix.AT_SYMLINK_NOFOLLOW)
	})
}

func mkdirL(path string, mode uint32) error {
	return longpath.At(path, "mkdir", func(dir int, name string) error { return unix.Mkdirat(dir, name, mode) })
}

func removeL(path string) error {
	return longpath.At(path, "remove", func(dir int, name string) error {
		err := unix.Unlinkat(dir, name, 0)
		if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EPERM) {
			err = unix.Unlinkat(dir, name, unix.AT_REMOVEDIR)
		}
		return err
	})
}

func lchownL(path string, uid, gid int) error {
	return longpath.At(path, "lchown", func(dir int, name string) error {
		return unix.Fchownat(dir, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW)
	})
}

func chmodL(path string, mode uint32) error {
	return longpath.At(path, "chmod", func(dir int, name string) error { return unix.Fchmodat(dir, name, mode, 0) })
}

func utimesL(path string, ts []unix.Timespec) error {
	return longpath.At(path, "utimes", func(dir int, name string) error {
		return unix.UtimesNanoAt(dir, name, ts, unix.AT_SYMLINK_NOFOLLOW)
	})
}

// renameL renames from to to, both of any length.
func renameL(from, to string) error {
	if len(from) < unix.PathMax && len(to) < unix.PathMax {
		return os.Rename(from, to)
	}
	return longpath.At(from, "rename", func(fromDir int, fromName string) error {
		return longpath.At(to, "rename to", func(toDir int, toName string) error {
			return unix.Renameat(fromDir, fromName, toDir, toName)
		})
	})
}

// withFd runs op on a descriptor of the entry at path, not following a
// symlink: xattrs have no *at calls, but the path of an O_PATH
// descriptor in /proc/self/fd reaches the inode itself.
func withFd(path, what string, op func(proc string) error) error {
	return longpath.At(path, what, func(dir int, name string) error {
		fd, err := unix.Openat(dir, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return op("/proc/self/fd/" + strconv.Itoa(fd))
	})
}

// getxattrL returns the value of xattr attr of path ("" if it has
// none), not following a symlink.
func getxattrL(path, attr string) (string, error) {
	if len(path) < unix.PathMax {
		return ovl.Get(path, attr)
	}
	var value string
	err := withFd(path, "getxattr "+attr, func(proc string) error {
		buf := make([]byte, 4096)
		n, err := unix.Getxattr(proc, attr, buf)
		if err == nil {
			value = string(buf[:n])
		}
		return err
	})
	if errors.Is(err, unix.ENODATA) {
		return "", nil
	}
	return value, err
}

// hasXattrL reports whether path has xattr attr, not following a
// symlink.
func hasXattrL(path, attr string) (bool, error) {
	if len(path) < unix.PathMax {
		return ovl.Has(path, attr)
	}
	err := withFd(path, "getxattr "+attr, func(proc string) error {
		_, err := unix.Getxattr(proc, attr, nil)
		return err
	})
	if errors.Is(err, unix.ENODATA) {
		return false, nil
	}
	return err == nil, err
}

func setxattrL(path, attr string, value []byte) error {
	if len(path) < unix.PathMax {
		return unix.Lsetxattr(path, attr, value, 0)
	}
	return withFd(path, "setxattr "+attr, func(proc string) error { return unix.Setxattr(proc, attr, value, 0) })
}

func removexattrL(path, attr string) error {
	if len(path) < unix.PathMax {
		return unix.Lremovexattr(path, attr)
	}
	return withFd(path, "removexattr "+attr, func(proc string) error { return unix.Removexattr(proc, attr) })
}
