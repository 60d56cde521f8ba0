package sessions

import "errors"

// Errors the daemon returns; the socket API maps each to an api code.
var (
	// ErrNotFound: no Workspace by that id.
	ErrNotFound = errors.New("no such workspace")
	// ErrCap: the configured cap on live Workspaces is reached.
	ErrCap = errors.New("workspace cap reached")
	// ErrDirty: ending a Workspace that holds uncommitted changes without
	// asking to discard them.
	ErrDirty = errors.New("workspace has uncommitted changes")
	// ErrNoCommand: exec of a program that is not there (a shell's 127).
	ErrNoCommand = errors.New("command not found")
	// ErrCannotRun: exec of a file that cannot be run (a shell's 126).
	ErrCannotRun = errors.New("command cannot be run")
	// ErrTooLarge: a request body over api.MaxBody.
	ErrTooLarge = errors.New("request too large")
	// ErrBadRequest: a request that cannot be carried out as asked.
	ErrBadRequest = errors.New("bad request")
	// ErrRunning: a commit while processes still run in the Workspace,
	// whose later writes it could not keep.
	ErrRunning = errors.New("processes still run in the workspace")
	// ErrClosed: the daemon is shutting down.
	ErrClosed = errors.New("daemon is shutting down")
	// ErrSocketInUse: another daemon serves the socket.
	ErrSocketInUse = errors.New("socket in use")
	// ErrStateInUse: another daemon holds the state directory.
	ErrStateInUse = errors.New("state directory in use")
)
