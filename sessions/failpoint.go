package sessions

import "sync"

// Failpoints name places where a test can make the daemon fail, or stop
// dead as a crash would (SetFailpointForTest): steps whose failure or
// interruption no test could provoke otherwise.
const (
	// FailpointHostPath is the attach of a Workspace's new view at its
	// host path (show).
	FailpointHostPath = "show-host-path"
	// FailpointNamespace is the attach of a Workspace's new view in its
	// namespace (show).
	FailpointNamespace = "show-namespace"
	// FailpointCaptured is a commit's end of capture, before the publish
	// (Commit).
	FailpointCaptured = "captured"
	// FailpointRebaseStep is each change a rebase makes to the upperdir
	// (rebaseLog.apply).
	FailpointRebaseStep = "rebase-step"
	// FailpointRebaseRename is a rebase's rename of the rewritten
	// upperdir to the next generation, after the Store's Lease moved.
	FailpointRebaseRename = "rebase-rename"
	// FailpointResume is a restored Workspace's resume at a start, once
	// its view is shown, before a commit it had not followed is
	// finished.
	FailpointResume = "resume"
	// FailpointRemove is each removal the background remover makes
	// (removeInBackground), before it: a test can hold the remover back
	// there, as a machine busy with big removals does.
	FailpointRemove = "background-remove"
)

var failpoints struct {
	mu  sync.Mutex
	fns map[string]func() error
}

// SetFailpointForTest makes the daemon call fn at failpoint name, and
// fail there with the error it returns, if any; a nil fn clears it. For
// tests only.
func SetFailpointForTest(name string, fn func() error) {
	failpoints.mu.Lock()
	defer failpoints.mu.Unlock()
	if failpoints.fns == nil {
		failpoints.fns = map[string]func() error{}
	}
	if fn == nil {
		delete(failpoints.fns, name)
	} else {
		failpoints.fns[name] = fn
	}
}

// failpoint runs the function a test set at name, if any.
func failpoint(name string) error {
	failpoints.mu.Lock()
	fn := failpoints.fns[name]
	failpoints.mu.Unlock()
	if fn == nil {
		return nil
	}
	return fn()
}
