// Package longpath reaches paths longer than Linux's PATH_MAX. The Store
// holds paths of up to 4095 bytes; with the directory they live in put in
// front — an export's target, a Workspace's upperdir or host path — they
// may be longer than a system call takes. Such a path is reached a run of
// components at a time, each run under PATH_MAX, by O_PATH opens of its
// directories, and the operation is made relative to the last of them.
// Paths that fit, as nearly every one does, are used as they are.
package longpath

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// At runs op on path as a directory descriptor and a name in it: the
// current directory and path itself where path fits in PATH_MAX, else
// path's directory, opened a run of components at a time, and its last
// component. An error is an *fs.PathError naming what and path.
func At(path, what string, op func(dir int, name string) error) error {
	if len(path) < unix.PathMax {
		if err := op(unix.AT_FDCWD, path); err != nil {
			return &fs.PathError{Op: what, Path: path, Err: err}
		}
		return nil
	}
	dirPath, name := filepath.Split(path)
	dir, err := OpenDir(filepath.Clean(dirPath))
	if err != nil {
		return &fs.PathError{Op: what, Path: path, Err: err}
	}
	defer unix.Close(dir)
	if err := op(dir, name); err != nil {
		return &fs.PathError{Op: what, Path: path, Err: err}
	}
	return nil
}

// Open opens path, of any length, with flags (O_CLOEXEC added), and perm
// for a file it creates.
func Open(path string, flags int, perm uint32) (*os.File, error) {
	var f *os.File
	err := At(path, "open", func(dir int, name string) error {
		fd, err := unix.Openat(dir, name, flags|unix.O_CLOEXEC, perm)
		if err == nil {
			f = os.NewFile(uintptr(fd), path)
		}
		return err
	})
	return f, err
}

// OpenDir opens directory path, of any length, O_PATH.
func OpenDir(path string) (int, error) {
	dir, rest := unix.AT_FDCWD, path
	for rest != "" {
		// The longest run of whole components under PATH_MAX (the first
		// may be absolute; the rest are relative to the one before).
		run := rest
		if len(run) >= unix.PathMax {
			cut := strings.LastIndexByte(rest[:unix.PathMax-1], '/')
			if cut <= 0 {
				return -1, unix.ENAMETOOLONG
			}
			run = rest[:cut]
		}
		rest = strings.TrimLeft(rest[len(run):], "/")
		fd, err := unix.Openat(dir, run, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if dir != unix.AT_FDCWD {
			unix.Close(dir)
		}
		if err != nil {
			return -1, err
		}
		dir = fd
	}
	return dir, nil
}
