package sessions

import (
	"errors"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/publish"
)

// A command after a commit tends to touch the big files the commit
// changed: an agent edits the same files again and again. The first
// command to open such a file in a fresh overlay waits for the overlay to
// look it up in its lower layer — the FUSE mount's lookup, overlayfs's
// metacopy and redirect attributes, the Slot's attributes: five requests
// to the daemon, ~1.1 ms of a 10-byte edit's exec on two busy cores. So
// Exec looks those files up in the Workspace's view, beside the command's
// start (fork, exec, the shell's own start take longer), and the command's
// open finds them looked up. A lookup only (an O_PATH open): nothing is
// read, written or copied up, and the kernel keeps what the overlay found
// in its dentry cache, for as long as memory allows.

// Limits of what is remembered: the big files (warmMin bytes or more) of
// the last hotCommits Commits a Workspace of this daemon landed with any,
// the first hotPerCommit of each.
const (
	hotCommits   = 64
	hotPerCommit = 16
)

// hotPaths remembers, per Commit, the big files it changed.
type hotPaths struct {
	mu    sync.Mutex
	paths map[object.ID][]string
	order []object.ID // oldest first
}

// add records the big files cs, which commit landed, changed.
func (h *hotPaths) add(commit object.ID, cs *publish.Changeset) {
	var paths []string
	for _, c := range cs.Changes {
		if bigFile(c.Entry) && len(paths) < hotPerCommit {
			paths = append(paths, c.Path)
		}
	}
	if len(paths) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.paths == nil {
		h.paths = map[object.ID][]string{}
	}
	if _, ok := h.paths[commit]; !ok {
		h.order = append(h.order, commit)
	}
	h.paths[commit] = paths
	for len(h.order) > hotCommits {
		delete(h.paths, h.order[0])
		h.order = h.order[1:]
	}
}

// of returns the big files commit changed, if this daemon landed it lately.
func (h *hotPaths) of(commit object.ID) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.paths[commit]
}

// lookUpAhead looks up, in the Workspace's current view, the big files its
// Commit changed, in the background: once per view (generation), at the
// first command that finds any to look up. Callers hold w.mu for writing.
func (w *workspace) lookUpAhead() {
	if w.lookedUp == w.rec.Gen+1 {
		return
	}
	paths := w.d.hot.of(w.rec.lease())
	if len(paths) == 0 {
		return // yet: the Commit's list may come after this command
	}
	w.lookedUp = w.rec.Gen + 1
	// The view as it is now, not whatever a commit may have switched the
	// host path to by the time the goroutine runs.
	root, err := unix.Open(w.hostPath(), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	d := w.d
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		unix.Close(root)
		return
	}
	d.warming.Add(1) // Close waits for it before it unmounts the Store
	d.mu.Unlock()
	go func() {
		defer d.warming.Done()
		defer unix.Close(root)
		d.metrics.lookedUpAhead.Add(int64(lookUpBeneath(root, paths)))
	}()
}

// lookUpBeneath looks up each of paths (slash-separated, relative) below
// the directory root, refusing symlinks (the last component's too) and
// other mounts on the way: a Workspace's command may have made any of
// them a symlink to somewhere else. It returns how many it found.
func lookUpBeneath(root int, paths []string) int {
	how := &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_XDEV,
	}
	found := 0
	for _, p := range paths {
		fd, err := unix.Openat2(root, p, how)
		if err == nil {
			unix.Close(fd)
			found++
		} else if errors.Is(err, unix.ENOSYS) {
			return found // no openat2 (Linux < 5.6): no priming
		}
	}
	return found
}
