package sessions

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/publish"
	"github.com/layerfs/layerfs/store"
)

// Commit captures a Workspace's upperdir and publishes it through the
// gate. Committed or UpToDate, the Workspace then follows the new head
// with an empty upperdir. On a Conflict nothing is committed: files with
// overlapping edits get marker blocks, and the Workspace follows the new
// head keeping all its other changes pending.
//
// A Committed result is returned as soon as the Commit has landed (and
// its blame recorded): the switch to the new head — a new overlay, ~1–1.5
// ms here — follows in the background, holding w.mu. It starts when the
// Workspace is next asked for anything, which then waits for it and sees
// the new head, or after switchDelay. An end that comes first does not
// wait, and the new overlay is never made (see switchTo). Until the
// switch, the host path shows the old view: the same files, unless the
// commit merged other Workspaces' changes.
func (d *Daemon) Commit(id string, req api.CommitRequest) (api.CommitResult, error) {
	w, err := d.get(id)
	if err != nil {
		return api.CommitResult{}, err
	}
	w.needed()
	w.mu.Lock()
	res, handedOff, err := w.commit(req)
	if !handedOff {
		res.Workspace = w.describeLocked()
		w.mu.Unlock()
	}
	if err != nil {
		return res, fmt.Errorf("commit %s: %w", id, err)
	}
	switch res.Status {
	case api.StatusCommitted:
		d.metrics.commits.Add(1)
	case api.StatusUpToDate:
		d.metrics.upToDate.Add(1)
	case api.StatusConflict:
		d.metrics.conflicts.Add(1)
	}
	return res, nil
}

// commit commits the Workspace; the caller holds w.mu. If it hands the
// switch to the new head off (handedOff), the switch unlocks w.mu.
func (w *workspace) commit(req api.CommitRequest) (_ api.CommitResult, handedOff bool, _ error) {
	if err := w.usable(); err != nil {
		return api.CommitResult{}, false, err
	}
	start := time.Now()
	// Counting the processes still running scans /proc (~1 ms): do it
	// beside the capture, which it only decides whether to keep.
	running := make(chan int, 1)
	go func() { running <- w.d.reaper.running(w.holder.ns) }()
	rules, err := w.ignoreRules(true)
	if err != nil {
		return api.CommitResult{}, false, err
	}
	c, err := publish.CaptureUpper(w.d.s, w.captured(rules))
	n := <-running
	if err != nil {
		return api.CommitResult{}, false, err
	}
	// The data files capture made (datalayer.go) are kept if the Commit
	// lands, and removed otherwise.
	landed := false
	defer func() {
		if w.d.data != nil && !landed {
			w.d.data.drop(c.Clones)
		}
	}()
	if n > 0 && !req.AllowRunning {
		return api.CommitResult{}, false, fmt.Errorf("%w: %d; what they write after the capture would not be kept: wait for them, or commit with allow_running", ErrRunning, n)
	}
	msg := req.Message
	if msg == "" {
		msg = fmt.Sprintf("%s: %d paths", w.rec.ID, c.Paths)
	}
	// The Lease moves to the new Commit in the transaction that lands it,
	// which saves the switch to the new head a transaction of its own.
	moveLease := func(tx *store.RefTx, commit object.ID) error {
		return tx.SetLease(w.rec.ID, w.rec.Branch, w.d.id, commit)
	}
	res, err := publish.Publish(w.d.s, w.rec.Branch, c.Changes, c.Content,
		publish.Meta{Origin: store.OriginSession + w.rec.ID, Message: msg, Force: req.Force, DeferAudit: true, Landing: moveLease})
	if err != nil {
		return api.CommitResult{}, false, err
	}
	landed = res.Status == publish.Committed // its data files are made after the switch (switchTo)
	remount := time.Now()
	var markers []string
	switch res.Status {
	case publish.Committed:
		w.rec.Commits++
		// The spare, if of this branch, is stale: its refresh starts now,
		// beside the switch, for the create that may come next.
		w.d.spares.fill(w.rec.Branch, res.Commit)
		// The audit (blame's record of the Commit) before the reply, so
		// that blame asked next names it; the switch after.
		res.FinishAudit()
		out := resultOf(res, c)
		out.Receipt.TotalMS = ms(time.Since(start))
		out.Workspace = w.describeLocked()
		out.Workspace.Lease = out.Commit // where the switch goes
		w.switchTo(res, c)
		return out, true, nil
	case publish.UpToDate:
		err = w.follow(res.Head, nil, false)
	case publish.Conflict:
		markers, err = w.rebase(res, c)
	}
	res.FinishAudit() // if follow stopped before it ran
	out := resultOf(res, c)
	out.Markers = markers
	out.Receipt.RemountMS = ms(time.Since(remount))
	out.Receipt.TotalMS = ms(time.Since(start))
	return out, false, err
}

// ignoreRules reads /.layerfsignore from the branch head: ignored paths
// are never captured. For a commit (forCommit), which will wait for the
// writer's connection anyway, the head is read through it (HeadForWrite):
// its page cache holds across commits, where a reader's is dropped after
// every one (~0.2 ms). A read-only question (what is pending?) asks a
// reader, and so never waits behind other Workspaces' writes.
func (w *workspace) ignoreRules(forCommit bool) (*publish.Rules, error) {
	var head object.ID
	var err error
	if forCommit {
		head, err = w.d.s.HeadForWrite(w.rec.Branch)
	} else {
		var b store.Branch
		b, err = w.d.s.Branch(w.rec.Branch)
		head = b.Head
	}
	if err != nil {
		return nil, err
	}
	c, err := w.d.s.Commit(head)
	if err != nil {
		return nil, err
	}
	return publish.LoadRules(w.d.s, c.Tree, publish.IgnoreFile)
}

// switchTo moves the Workspace to the Commit res landed, in the
// background (see Daemon.Commit), and then makes the Commit's data files;
// it unlocks w.mu when done. Should the switch fail, the Workspace stays
// on its old view, and what is asked of it next fails with that error
// (switchErr): the changes it would commit again have landed.
func (w *workspace) switchTo(res *publish.Result, c *publish.Capture) {
	sw := &switching{kick: make(chan struct{})}
	w.smu.Lock()
	w.switching = sw
	w.smu.Unlock()
	w.d.switches.Add(1)
	go func() {
		defer w.d.switches.Done()
		select {
		case <-sw.kick:
		case <-time.After(switchDelay):
		}
		w.smu.Lock()
		ending := sw.ending
		w.smu.Unlock()
		old := w.rec.lease()
		var err error
		if !ending {
			err = w.follow(res.Commit, nil, true)
		}
		if w.d.data != nil {
			// After the switch to the new head: the data files made after
			// the Commit (clones, on the volume the new overlay's
			// directories are made on) slowed the mount beside them.
			w.d.data.land(c.Clones)
			w.d.data.evict(w.d.oldestView())
		}
		if err == nil && !ending {
			w.d.warm(old, res.Commit, c.Changes)
		} else if err != nil {
			w.switchErr = fmt.Errorf("switch to %s, the head its last commit made: %w", res.Commit.Short(), err)
			w.d.log.Printf("workspace %s: %v", w.rec.ID, w.switchErr)
		}
		w.smu.Lock()
		ending = sw.ending
		w.switching = nil
		w.smu.Unlock()
		if ending {
			w.teardown()
		}
		w.mu.Unlock()
	}()
}

// switchDelay is how long a switch to a new head waits before it starts,
// unless the Workspace is asked for something first (needed): ended
// meanwhile — a rollout's commit and end — it skips the new overlay, whose
// mount and unmount are ~1 ms of work on cores the next Workspace needs.
const switchDelay = 2 * time.Millisecond

// switching is a switch to a new head under way (switchTo); ending says
// the Workspace was ended meanwhile, and the switch tears it down instead
// of switching, or when done. kick, closed (kicked), starts it now.
type switching struct {
	ending, kicked bool
	kick           chan struct{}
}

// needed starts the Workspace's switch to a new head now, if one waits
// (switchDelay): a request is about to wait for it.
func (w *workspace) needed() {
	w.smu.Lock()
	defer w.smu.Unlock()
	if sw := w.switching; sw != nil && !sw.kicked {
		sw.kicked = true
		close(sw.kick)
	}
}

// endDuringSwitch ends a Workspace whose switch to a new head is under
// way, without waiting for it: it has nothing pending (its upperdir was
// just committed), it leaves the daemon's table and the Store's leases
// now, its directory is marked ended (a restart removes it), and the
// switch tears it down. It reports false if no switch is under way.
func (d *Daemon) endDuringSwitch(w *workspace) (bool, error) {
	w.smu.Lock()
	defer w.smu.Unlock()
	sw := w.switching
	if sw == nil {
		return false, nil
	}
	sw.ending = true
	if !sw.kicked {
		sw.kicked = true
		close(sw.kick)
	}
	d.mu.Lock()
	delete(d.ws, w.rec.ID)
	d.mu.Unlock()
	err := os.WriteFile(filepath.Join(d.dir("ws", w.rec.ID), endedMarker), nil, 0o600)
	err = errors.Join(err, d.s.DropLease(w.rec.ID))
	d.metrics.ended.Add(1)
	return true, err
}

func resultOf(res *publish.Result, c *publish.Capture) api.CommitResult {
	out := api.CommitResult{Status: res.Status.String(), Head: res.Head.String(), Paths: res.Paths, Receipt: receipt(c, res)}
	if res.Status == publish.Committed {
		out.Commit = res.Commit.String()
	}
	for _, pc := range res.Conflicts {
		out.Conflicts = append(out.Conflicts, api.PathConflict{Path: pc.Path, Kind: pc.Kind})
	}
	for _, m := range res.Merged {
		out.Merged = append(out.Merged, m.Path)
	}
	for _, d := range res.LWW {
		out.LWW = append(out.LWW, api.LWWDecision(d))
	}
	return out
}

func receipt(c *publish.Capture, res *publish.Result) api.Receipt {
	return api.Receipt{
		PathsCaptured: c.Paths, BytesHashed: c.BytesHashed,
		ObjectsNew: res.Objects.New, ObjectsReused: res.Objects.Reused, BytesStored: res.Objects.StoredBytes,
		CaptureMS: ms(c.Duration), PrepareMS: ms(res.Prepare), LockMS: ms(res.Lock), AuditMS: ms(res.Audit),
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
