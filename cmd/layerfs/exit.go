package main

import (
	"errors"
	"strings"

	"github.com/layerfs/layerfs"
	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/fusefs"
	"github.com/layerfs/layerfs/sessions"
	"github.com/layerfs/layerfs/store"
)

// Exit codes. Scripts may rely on them.
const (
	exitOK          = 0
	exitError       = 1 // anything not listed below
	exitUsage       = 2 // bad flags or arguments
	exitNotFound    = 3 // unknown ref, branch, path or Store
	exitConflict    = 4 // a file call's Conflict, already exists, ambiguous, ref moved
	exitCorrupt     = 5 // the Store is damaged (fsck found problems)
	exitUnsupported = 6 // Store on an unsupported filesystem, or a newer format
)

var exitCodes = []struct {
	err  error
	code int
}{
	{errUsage, exitUsage},
	{store.ErrBadName, exitUsage},
	{store.ErrBadPath, exitUsage},
	{store.ErrSquash, exitUsage},
	{layerfs.ErrIsDir, exitUsage},
	{layerfs.ErrIsSymlink, exitUsage},
	{layerfs.ErrNotDir, exitUsage},
	{layerfs.ErrBinary, exitUsage},
	{layerfs.ErrReadOnlyFS, exitUsage},
	{layerfs.ErrBadOffset, exitUsage},
	{layerfs.ErrEmptyEdit, exitUsage},
	{store.ErrMissingObject, exitCorrupt}, // before ErrNotFound, which it also is
	{store.ErrNotFound, exitNotFound},
	{layerfs.ErrNoMatch, exitNotFound},
	{errConflict, exitConflict},
	{layerfs.ErrManyMatch, exitConflict},
	{layerfs.ErrExists, exitConflict},
	{store.ErrExists, exitConflict},
	{store.ErrInUse, exitConflict},
	{store.ErrAmbiguous, exitConflict},
	{sessions.ErrStateInUse, exitConflict},
	{sessions.ErrSocketInUse, exitConflict},
	{sessions.ErrOtherStore, exitConflict},
	{store.ErrStale, exitConflict},
	{layerfs.ErrInitialized, exitConflict},
	{layerfs.ErrNotEmpty, exitConflict},
	{store.ErrCorrupt, exitCorrupt},
	{errUnsound, exitCorrupt},
	{store.ErrUnsupported, exitUnsupported},
	{store.ErrNewerFormat, exitUnsupported},
	{store.ErrNotStore, exitUnsupported},
}

var (
	errUsage    = errors.New("usage")
	errUnsound  = errors.New("the Store is not sound")
	errConflict = errors.New("conflict")
)

func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var interrupted *fusefs.InterruptedError
	if errors.As(err, &interrupted) {
		return interrupted.ExitCode() // 128+N, as a shell reports a command a signal ended
	}
	var apiErr *layerfs.APIError
	if errors.As(err, &apiErr) {
		if code, ok := apiExitCodes[apiErr.Code]; ok {
			return code
		}
		return exitError
	}
	for _, e := range exitCodes {
		if errors.Is(err, e.err) {
			return e.code
		}
	}
	if sqliteCorrupt(err) {
		return exitCorrupt
	}
	return exitError
}

// sqliteCorrupt reports whether err is SQLite finding the Store's file
// damaged (SQLITE_CORRUPT, any extended code): "database disk image is
// malformed". Its text is matched too, for errors that carry it only as
// text.
func sqliteCorrupt(err error) bool {
	const sqliteCorrupt = 11
	var coded interface{ Code() int }
	if errors.As(err, &coded) && coded.Code()&0xff == sqliteCorrupt {
		return true
	}
	return strings.Contains(err.Error(), "database disk image is malformed")
}

// apiExitCodes maps the daemon's error codes to exit codes.
var apiExitCodes = map[string]int{
	api.CodeBadRequest: exitUsage,
	api.CodeNotFound:   exitNotFound,
	api.CodeDirty:      exitConflict,
	api.CodeConflict:   exitConflict,
	api.CodeCap:        exitConflict,
	api.CodeMarkers:    exitConflict,
	api.CodeUnsettled:  exitConflict,
	api.CodeNoCommand:  127,
	api.CodeCannotRun:  126,
	api.CodeRunning:    exitConflict,
	api.CodeChanged:    exitConflict,
}
