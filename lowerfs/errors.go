package lowerfs

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/layerfs/layerfs/object"
)

// Errors returned by a View, wrapped with the path or entry concerned. Test
// them with errors.Is.
var (
	// ErrNotExist: no entry by that name (it is fs.ErrNotExist).
	ErrNotExist = fs.ErrNotExist
	// ErrNotDir: a path component, or the entry listed, is not a directory.
	ErrNotDir = errors.New("not a directory")
	// ErrIsDir: a directory was opened or read as a file.
	ErrIsDir = errors.New("is a directory")
	// ErrNotSymlink: readlink of an entry that is not a symbolic link.
	ErrNotSymlink = errors.New("not a symbolic link")
	// ErrInvalid: a bad path, offset or argument.
	ErrInvalid = errors.New("invalid argument")
	// ErrUnreadable: a stored object the Commit refers to is missing or
	// corrupt. Such errors are *ObjectError values naming the object.
	ErrUnreadable = errors.New("unreadable object")
)

// ObjectError reports an object that could not be loaded from the Store.
type ObjectError struct {
	Kind object.Kind
	ID   object.ID
	Err  error // what the Store said: store.ErrNotFound, store.ErrCorrupt, ...
}

func (e *ObjectError) Error() string {
	return fmt.Sprintf("load %s %s: %v", e.Kind, e.ID, e.Err)
}

func (e *ObjectError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnreadable) hold for every ObjectError.
func (e *ObjectError) Is(target error) bool { return target == ErrUnreadable }
