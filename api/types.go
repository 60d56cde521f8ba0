package api

import (
	"encoding/base64"
	"time"
)

// CreateRequest asks for a Workspace of a branch.
type CreateRequest struct {
	// Branch to lease; default "main".
	Branch string `json:"branch,omitempty"`
	// Path is where the Workspace appears inside the private mount
	// namespace commands run in; default DefaultPath.
	Path string `json:"path,omitempty"`
}

// DefaultPath is where a Workspace appears to the commands run in it.
const DefaultPath = "/workspace"

// Workspace describes one Workspace.
type Workspace struct {
	ID     string `json:"id"`
	Branch string `json:"branch"`
	// Lease is the Commit its lower layer shows (full hex id).
	Lease string `json:"lease"`
	// Path inside exec's mount namespace; HostPath where tools outside see it.
	Path     string    `json:"path"`
	HostPath string    `json:"host_path"`
	Created  time.Time `json:"created"`
	Commits  int       `json:"commits"`
	// Pending lists uncommitted changed paths (inspect only).
	Pending []string `json:"pending,omitempty"`
	// Unsettled lists the paths a conflict left holding this Workspace's
	// version without marker blocks (binary, type, delete and mode
	// conflicts): a commit refuses them unchanged (conflict_unsettled)
	// unless forced.
	Unsettled []string `json:"unsettled,omitempty"`
}

// ExecRequest runs one command in a Workspace.
type ExecRequest struct {
	Argv []string `json:"argv"`
	// Env replaces the environment when set (KEY=VALUE), empty (not nil)
	// for none at all; nil: the daemon's own environment. (Not omitempty:
	// an empty one would go as nil.)
	Env []string `json:"env"`
	// Cwd is relative to the Workspace root, or absolute inside the
	// namespace; default the Workspace root.
	Cwd string `json:"cwd,omitempty"`
	// Stdin is the command's standard input as text, or StdinBase64 the
	// same as base64, for input that is not UTF-8 (a JSON string holds
	// only text). At most one of them; neither: /dev/null.
	Stdin       string `json:"stdin,omitempty"`
	StdinBase64 string `json:"stdin_base64,omitempty"`
	// TimeoutMS kills the command's process group after this long; 0: none.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// IsolateNetwork runs the command in the Workspace's own network
	// namespace, which has only loopback.
	IsolateNetwork bool `json:"isolate_network,omitempty"`
}

// ExecResult is how a command ended.
type ExecResult struct {
	ExitCode int `json:"exit_code"`
	// Stdout and Stderr are the command's output if it is UTF-8 text;
	// output that is not comes as base64 in StdoutBase64 or StderrBase64
	// instead, and the text field is empty. StdoutBytes and StderrBytes
	// return it either way. Each keeps the first MaxOutput bytes;
	// Truncated says one of them had more (the streaming form has no
	// bound).
	Stdout       string  `json:"stdout"`
	StdoutBase64 string  `json:"stdout_base64,omitempty"`
	Stderr       string  `json:"stderr"`
	StderrBase64 string  `json:"stderr_base64,omitempty"`
	Truncated    bool    `json:"truncated"`
	DurationMS   float64 `json:"duration_ms"`
	TimedOut     bool    `json:"timed_out"`
}

// MaxOutput bounds the stdout and the stderr an ExecResult holds.
const MaxOutput = 16 << 20

// StdoutBytes is the command's stdout, from whichever field holds it.
func (r ExecResult) StdoutBytes() []byte { return textOrBase64(r.Stdout, r.StdoutBase64) }

// StderrBytes is the command's stderr, from whichever field holds it.
func (r ExecResult) StderrBytes() []byte { return textOrBase64(r.Stderr, r.StderrBase64) }

// ExecEvent is one line of a streamed exec: output as it comes, then the
// result (no output there: it was streamed). A piece of output is in Data
// if it is UTF-8 text, else as base64 in DataBase64; Bytes returns it
// either way. Text is never cut inside a character.
type ExecEvent struct {
	Stream     string      `json:"stream,omitempty"` // "stdout" or "stderr"
	Data       string      `json:"data,omitempty"`
	DataBase64 string      `json:"data_base64,omitempty"`
	Result     *ExecResult `json:"result,omitempty"`
}

// Bytes is the event's output, from whichever field holds it.
func (e ExecEvent) Bytes() []byte { return textOrBase64(e.Data, e.DataBase64) }

// textOrBase64 returns text's bytes, or b64's decoded if it is set (the
// daemon sets one of them; a b64 that does not decode yields nil).
func textOrBase64(text, b64 string) []byte {
	if b64 == "" {
		return []byte(text)
	}
	data, _ := base64.StdEncoding.DecodeString(b64)
	return data
}

// CommitRequest describes the Commit sandbox.commit makes.
type CommitRequest struct {
	Message string `json:"message,omitempty"`
	// Force lands files that still hold conflict markers.
	Force bool `json:"force,omitempty"`
	// AllowRunning commits while processes still run in the Workspace.
	// What they write after the capture goes to the view the Workspace
	// leaves behind and is not kept, so by default such a commit is
	// refused (409, commands_running).
	AllowRunning bool `json:"allow_running,omitempty"`
}

// Commit statuses.
const (
	StatusCommitted = "committed"
	StatusUpToDate  = "up-to-date"
	StatusConflict  = "conflict"
)

// CommitResult says what a commit did.
type CommitResult struct {
	Status string `json:"status"`
	Commit string `json:"commit,omitempty"` // the new head (committed)
	Head   string `json:"head"`             // the head the changes met
	// Paths in conflict.
	Paths []string `json:"paths,omitempty"`
	// Conflicts says why each path conflicts (text, binary, type, delete,
	// mode); Markers lists the files the Workspace now holds marker blocks
	// in, to fix and commit again.
	Conflicts []PathConflict `json:"conflicts,omitempty"`
	Markers   []string       `json:"markers,omitempty"`
	// Merged lists paths both sides changed that merged line by line; LWW
	// the .lww decisions.
	Merged []string      `json:"merged,omitempty"`
	LWW    []LWWDecision `json:"lww,omitempty"`
	// Kept lists what the commit left out of the Store and the Workspace
	// still holds: following the head, it carries them into its new
	// upperdir. Dropped lists those it could not carry: their directory
	// is no longer one on the head, or moving them failed (the daemon's
	// log says why).
	Kept      []UncommittedPath `json:"kept,omitempty"`
	Dropped   []UncommittedPath `json:"dropped,omitempty"`
	Receipt   Receipt           `json:"receipt"`
	Workspace Workspace         `json:"workspace"`
}

// DiscardResult is what a discard kept. It drops every uncommitted change
// but, unless asked to drop everything (?all=1), keeps what a commit would
// have left out — paths /.layerfsignore matches, FIFOs, sockets and
// devices — as a commit keeps them. Dropped lists those it could not
// keep: their directory was itself a discarded change, or moving them
// failed (the daemon's log says why).
type DiscardResult struct {
	Kept    []UncommittedPath `json:"kept"`    // [] when none
	Dropped []UncommittedPath `json:"dropped"` // [] when none
	// EndedCommands counts the processes still running in the Workspace
	// that the discard ended: they would have gone on in the view it
	// drops, writing nowhere.
	EndedCommands int       `json:"ended_commands"`
	Workspace     Workspace `json:"workspace"`
}

// UncommittedPath is a path a commit left out of the Store, and why.
type UncommittedPath struct {
	Path string `json:"path"`
	Why  string `json:"why"` // UncommittedIgnored or UncommittedSpecial
}

// Why a commit left a path out.
const (
	UncommittedIgnored = "ignored" // /.layerfsignore matches it (a whole directory, if it matched one)
	UncommittedSpecial = "special" // a FIFO, socket or device, which a Store does not hold
)

// PathConflict is one conflicting path and why.
type PathConflict struct {
	Path string `json:"path"`
	Kind string `json:"kind"`
}

// LWWDecision is how a .lww rule settled a path: the newer side won.
type LWWDecision struct {
	Path      string `json:"path"`
	Winner    string `json:"winner"` // "ours" or "head"
	OursMTime int64  `json:"ours_mtime"`
	HeadMTime int64  `json:"head_mtime"`
}

// Receipt accounts for one commit: what was captured, hashed and stored,
// and how long each phase took.
type Receipt struct {
	PathsCaptured int     `json:"paths_captured"`
	BytesHashed   int64   `json:"bytes_hashed"`
	ObjectsNew    int     `json:"objects_new"`
	ObjectsReused int     `json:"objects_reused"`
	BytesStored   int64   `json:"bytes_stored"`
	CaptureMS     float64 `json:"capture_ms"`
	PrepareMS     float64 `json:"prepare_ms"`
	LockMS        float64 `json:"lock_ms"`
	AuditMS       float64 `json:"audit_ms"`
	RemountMS     float64 `json:"remount_ms"`
	TotalMS       float64 `json:"total_ms"`
}

// Health is the daemon's status.
type Health struct {
	OK         bool   `json:"ok"`
	Store      string `json:"store"`
	Workspaces int    `json:"workspaces"`
	Max        int    `json:"max_workspaces"`
	FUSE       string `json:"fuse_mount"`
	// Problem says why OK is false.
	Problem string `json:"problem,omitempty"`
	// Unrestored lists the Workspaces recorded in the state directory
	// that the daemon could not bring back at its start; the others
	// serve. Their files and Leases are kept as they were, and the next
	// start tries again; an end with discard removes one for good.
	Unrestored []Unrestored `json:"unrestored,omitempty"`
}

// Unrestored is a Workspace the daemon could not bring back at its
// start, and why.
type Unrestored struct {
	ID string `json:"id"`
	// Dir is its directory in the state directory: its record and
	// upperdirs, with its uncommitted changes, left as they were.
	Dir   string `json:"dir"`
	Error string `json:"error"`
}

// Error is the body of every failed request.
type Error struct {
	Code  string `json:"code"`
	Error string `json:"error"`
}

// MaxBody bounds a request's body: exec's stdin travels in it, whole.
const MaxBody = 64 << 20

// Error codes.
const (
	CodeBadRequest = "bad_request"
	CodeNotFound   = "not_found"
	CodeCap        = "workspace_cap"
	CodeDirty      = "uncommitted_changes"
	CodeConflict   = "conflict"
	CodeMarkers    = "conflict_markers"
	CodeUnsettled  = "conflict_unsettled"
	CodeRunning    = "commands_running"
	// A file changed while the commit read it (a command left running,
	// an editor at the host path): nothing was published; commit again.
	CodeChanged   = "file_changed"
	CodeInternal  = "internal"
	CodeUnhealthy = "unhealthy" // GET /health, 503: see Health.Problem
	// An exec's program is missing, or cannot be run: ws exec exits 127
	// and 126 for them, as a shell does.
	CodeNoCommand = "command_not_found"
	CodeCannotRun = "command_not_executable"
)
