package sessions

import (
	"fmt"
	"slices"
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
func (d *Daemon) Commit(id string, req api.CommitRequest) (api.CommitResult, error) {
	w, err := d.get(id)
	if err != nil {
		return api.CommitResult{}, err
	}
	w.mu.Lock()
	res, err := w.commit(req)
	w.mu.Unlock()
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
	res.Workspace = w.describe()
	return res, nil
}

func (w *workspace) commit(req api.CommitRequest) (api.CommitResult, error) {
	if err := w.ended(); err != nil {
		return api.CommitResult{}, err
	}
	start := time.Now()
	// What editors write through the host path from here to the switch
	// would go with the old upperdir: they are refused instead (freeze.go).
	defer w.freezeHost()()
	// Its last commit landed, but the Workspace did not follow it: it
	// does first, so that this one's base is that Commit.
	if !w.unfollowed.IsZero() {
		if n := w.d.reaper.running(w.holder.ns); n > 0 && !req.AllowRunning {
			return api.CommitResult{}, errRunning(n)
		}
		conflict, err := w.catchUp()
		if err != nil || conflict != nil {
			return derefOr(conflict), err
		}
	}
	// The overlay the Workspace will follow the new head to was mounted
	// while a command ran (Exec), or is now, beside the capture and the
	// publish; follow binds it to the head.
	next := w.takeNext()
	if next == nil {
		next = w.prepareNext()
	}
	defer func() {
		if next != nil {
			next.discard(w)
		}
	}()
	// Counting the processes still running scans /proc (~1 ms): do it
	// beside the capture, which it only decides whether to keep.
	running := make(chan int, 1)
	go func() { running <- w.d.reaper.running(w.holder.ns) }()
	rules, err := w.ignoreRules()
	if err != nil {
		return api.CommitResult{}, err
	}
	c, err := publish.CaptureUpper(w.d.s, w.captured(rules))
	n := <-running
	if err != nil {
		return api.CommitResult{}, err
	}
	// The data files capture made (datalayer.go) are kept if the Commit
	// lands, and removed otherwise.
	landed := false
	defer func() {
		if w.d.data != nil && !landed {
			w.d.data.drop(c.Clones)
		}
	}()
	if err := failpoint(FailpointCaptured); err != nil {
		return api.CommitResult{}, err
	}
	if n > 0 && !req.AllowRunning {
		return api.CommitResult{}, errRunning(n)
	}
	if !req.Force {
		if err := checkSettled(w.rec.Unsettled, c.Changes); err != nil {
			return api.CommitResult{}, err
		}
	}
	msg := req.Message
	if msg == "" {
		msg = fmt.Sprintf("%s: %d path", w.rec.ID, c.Paths)
		if c.Paths != 1 {
			msg += "s"
		}
	}
	// The Lease moves to the new Commit in the transaction that lands it,
	// which saves the switch to the new head a transaction of its own.
	moveLease := func(tx *store.RefTx, commit object.ID) error {
		return tx.SetLease(w.rec.ID, w.rec.Branch, w.d.id, commit)
	}
	res, err := publish.Publish(w.d.s, w.rec.Branch, c.Changes, c.Content,
		publish.Meta{Origin: store.OriginSession + w.rec.ID, Message: msg, Force: req.Force, DeferAudit: true, Landing: moveLease})
	if err != nil {
		return api.CommitResult{}, err
	}
	landed = res.Status == publish.Committed // its data files are made below, after the switch
	remount := time.Now()
	var markers []string
	var dropped []api.UncommittedPath
	var cr *carry
	switch res.Status {
	case publish.Committed:
		w.rec.Unsettled = nil // saved with the switch
		// Before the switch: a Workspace made on the new head meanwhile
		// looks its big files up too (lookUpAhead).
		w.d.hot.add(res.Commit, c.Changes)
		old := w.rec.lease()
		cr = w.prepareCarry(c, res.Commit)
		err = w.follow(res.Commit, res.FinishAudit, true, next, cr)
		next = nil
		if err != nil {
			err = fmt.Errorf("it landed as %s, but the Workspace could not follow it: it shows the view before it until it does, first thing at its next commit, discard or end, or at the daemon's next start: %w", res.Commit.Short(), err)
		}
		if w.d.data != nil {
			// After the switch to the new head: the data files made after
			// the Commit (clones, on the volume the new overlay's
			// directories are made on) slowed the mount beside them.
			w.d.data.land(c.Clones)
			w.d.data.evict(w.d.oldestView())
		}
		if err == nil {
			w.d.warm(old, res.Commit, c.Changes)
		}
	case publish.UpToDate:
		w.rec.Unsettled = nil
		cr = w.prepareCarry(c, res.Head)
		err = w.follow(res.Head, nil, false, next, cr)
		next = nil
	case publish.Conflict:
		next.discard(w) // the rebase makes the next generation itself
		next = nil
		prev := w.rec.Unsettled
		w.rec.Unsettled = unsettledBy(res, c) // saved by the rebase
		markers, dropped, err = w.rebase(res, c)
		if err != nil {
			w.rec.Unsettled = prev // still on the old lease: nothing new to settle
		}
	}
	res.FinishAudit() // if follow stopped before it ran
	out := resultOf(res, c)
	out.Markers = markers
	if cr != nil {
		out.Kept, out.Dropped = cr.kept, cr.dropped
	} else if res.Status == publish.Conflict {
		// The upperdir stays, but for directories the head removed.
		for _, u := range uncommitted(c) {
			if !slices.Contains(dropped, u) {
				out.Kept = append(out.Kept, u)
			}
		}
		out.Dropped = dropped
	}
	out.Receipt.RemountMS = ms(time.Since(remount))
	out.Receipt.TotalMS = ms(time.Since(start))
	return out, err
}

// errRunning refuses a commit while n processes run in the Workspace.
func errRunning(n int) error {
	return fmt.Errorf("%w: %d; what they write after the capture would not be kept: wait for them, or commit with allow_running (ws commit --allow-running)", ErrRunning, n)
}

// derefOr is *r, or a zero result if r is nil.
func derefOr(r *api.CommitResult) api.CommitResult {
	if r == nil {
		return api.CommitResult{}
	}
	return *r
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
