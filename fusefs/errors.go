package fusefs

import "errors"

// Errors of mounting and unmounting. Errors met while serving become errno
// values in errno.go instead.
var (
	// ErrBadOption: a mount option that is unknown or malformed.
	ErrBadOption = errors.New("bad mount option")
	// ErrBadSource: a mount source that is not STORE or STORE#REF.
	ErrBadSource = errors.New("bad mount source: want STORE#REF or STORE")
	// ErrMounted: the mountpoint already has a live layerfs mount.
	ErrMounted = errors.New("already mounted")
	// ErrNotMounted: umount of a path that is not a layerfs mount.
	ErrNotMounted = errors.New("not a layerfs mount")
	// ErrServerFailed: a background server exited before its mount was
	// ready; its own message follows.
	ErrServerFailed = errors.New("mount server failed")
)
