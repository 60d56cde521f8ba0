package fusefs

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

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

// InterruptedError is a mount command stopped by a signal before its
// mount was ready. Nothing it started is left mounted.
type InterruptedError struct {
	Signal     os.Signal
	Mountpoint string
}

func (e *InterruptedError) Error() string {
	return fmt.Sprintf("mount at %s: interrupted (%s) before it was ready: nothing mounted", e.Mountpoint, e.Signal)
}

// ExitCode is what a shell reports for a command the signal ended: 128
// plus its number.
func (e *InterruptedError) ExitCode() int {
	if sig, ok := e.Signal.(syscall.Signal); ok {
		return 128 + int(sig)
	}
	return 1
}
