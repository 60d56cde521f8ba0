package publish

import (
	"errors"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Capture finds an upperdir's entries relative to their directory's
// descriptor, never by a path from the root: the upperdir's own path and a
// path of up to 4095 bytes in it may together be longer than Linux's
// PATH_MAX. Commands may still be at work in the Workspace while it runs
// (allow_running), or an editor on its host path.

// vanished drops err if it says an entry is gone since its directory was
// read — a file a command or an editor made and removed meanwhile, such
// as a temporary file renamed into place: there is nothing to take. (One
// that replaced a lower entry leaves a whiteout behind, which is taken.)
func vanished(err error) error {
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

// openIn opens name in directory dir for reading, without following a
// symlink.
func openIn(dir *os.File, name string, flags int) (*os.File, error) {
	full := filepath.Join(dir.Name(), name)
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|flags, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: full, Err: err}
	}
	return os.NewFile(uintptr(fd), full), nil
}

// readlinkIn reads the target of symlink name in directory dir.
func readlinkIn(dir *os.File, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(int(dir.Fd()), name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}
