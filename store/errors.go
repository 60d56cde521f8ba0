package store

import (
	"errors"

	"github.com/layerfs/layerfs/object"
)

// Errors the Store returns, wrapped with what was being done. Test them with
// errors.Is.
var (
	// ErrNotFound: no branch, ref, object or path by that name.
	ErrNotFound = errors.New("not found")
	// ErrAmbiguous: a ref prefix names more than one commit or layer.
	ErrAmbiguous = errors.New("ambiguous ref")
	// ErrExists: a branch of that name already exists.
	ErrExists = errors.New("already exists")
	// ErrCorrupt: stored bytes do not decode or do not hash to their ID.
	ErrCorrupt = object.ErrCorrupt
	// ErrUnsupported: the Store's directory is on a filesystem LayerFS does
	// not support (it needs local ext4, xfs, btrfs or tmpfs).
	ErrUnsupported = errors.New("unsupported")
	// ErrNewerFormat: the Store was written by a newer LayerFS.
	ErrNewerFormat = errors.New("store format is newer than this layerfs")
	// ErrNotStore: the file exists but is not a LayerFS Store.
	ErrNotStore = errors.New("not a layerfs store")
	// ErrBadName: a branch name is not allowed.
	ErrBadName = errors.New("bad name")
	// ErrStale: a ref moved since the caller read it (compare-and-swap lost).
	ErrStale = errors.New("ref moved")
	// ErrInUse: a branch that Workspaces are leased on.
	ErrInUse = errors.New("in use")
	// ErrReadOnly: the Store was opened read-only.
	ErrReadOnly = errors.New("store is read-only")
	// ErrMissingObject: an object the Store names (a tree's entry, a
	// commit's tree) is not in it: the Store is damaged. It is also
	// ErrNotFound.
	ErrMissingObject error = missingObject{}
)

type missingObject struct{}

func (missingObject) Error() string { return "missing from the Store (damaged: run layerfs fsck)" }
func (missingObject) Unwrap() error { return ErrNotFound }
