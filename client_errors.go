package layerfs

import (
	"errors"
	"fmt"

	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/publish"
	"github.com/layerfs/layerfs/store"
)

// Errors of daemon requests. A request the daemon refused returns an
// *APIError; errors.Is matches it against the sentinel its Code names
// (api.CodeNotFound: ErrNotFound, api.CodeCap: ErrWorkspaceCap, ...), and
// errors.As still finds the APIError itself, with its status, code and
// message. A code that names no one kind of failure (internal) matches
// none of them.
var (
	// ErrNotFound: no such Workspace, branch or ref, or an exec cwd that
	// is not there (not_found). It is store.ErrNotFound, which file calls
	// return for a missing path or ref.
	ErrNotFound = store.ErrNotFound
	// ErrBadRequest: a request that cannot be carried out as asked, or
	// is malformed (bad_request): a bad branch name or path, a cwd that
	// leaves the Workspace, a body over api.MaxBody.
	ErrBadRequest = errors.New("bad request")
	// ErrWorkspaceCap: the daemon's cap on live Workspaces is reached
	// (workspace_cap).
	ErrWorkspaceCap = errors.New("workspace cap reached")
	// ErrUncommitted: ending a Workspace that holds uncommitted changes
	// without discarding them (uncommitted_changes).
	ErrUncommitted = errors.New("workspace has uncommitted changes")
	// ErrMarkers: a commit of files that still hold conflict markers
	// (conflict_markers). It is publish.ErrMarkers.
	ErrMarkers = publish.ErrMarkers
	// ErrUnsettled: a commit of a version a conflict left unsettled, still
	// unchanged (conflict_unsettled).
	ErrUnsettled = errors.New("conflict not settled")
	// ErrCommandsRunning: a commit while processes the Workspace started
	// still run (commands_running).
	ErrCommandsRunning = errors.New("commands still run in the workspace")
	// ErrFileChanged: a commit that read a file while a command or an
	// editor wrote it, which published nothing: commit again
	// (file_changed). It is publish.ErrChanged.
	ErrFileChanged = publish.ErrChanged
	// ErrCommandNotFound: exec of a program that is not there
	// (command_not_found; a shell's 127).
	ErrCommandNotFound = errors.New("command not found")
	// ErrCannotRun: exec of a file that cannot be run
	// (command_not_executable; a shell's 126).
	ErrCannotRun = errors.New("command cannot be run")
	// ErrUnhealthy: GET /health of a daemon that is shutting down or lost
	// its FUSE mount (unhealthy); Health also returns its api.Health.
	ErrUnhealthy = errors.New("daemon unhealthy")
)

// codeErrors maps the daemon's error codes to the sentinels they match.
var codeErrors = map[string]error{
	api.CodeNotFound:   ErrNotFound,
	api.CodeBadRequest: ErrBadRequest,
	api.CodeCap:        ErrWorkspaceCap,
	api.CodeDirty:      ErrUncommitted,
	api.CodeMarkers:    ErrMarkers,
	api.CodeUnsettled:  ErrUnsettled,
	api.CodeRunning:    ErrCommandsRunning,
	api.CodeChanged:    ErrFileChanged,
	api.CodeNoCommand:  ErrCommandNotFound,
	api.CodeCannotRun:  ErrCannotRun,
	api.CodeUnhealthy:  ErrUnhealthy,
}

// APIError is a request the daemon refused: its HTTP status, error code
// and message. errors.Is matches it against the sentinel its code names
// (see ErrNotFound and the others beside it).
type APIError struct {
	Status int
	Code   string // one of the api.Code* values
	Msg    string
}

func (e *APIError) Error() string { return fmt.Sprintf("daemon: %s (%s)", e.Msg, e.Code) }

// Is reports whether target is the sentinel e's code names.
func (e *APIError) Is(target error) bool {
	sentinel, ok := codeErrors[e.Code]
	return ok && sentinel == target
}
