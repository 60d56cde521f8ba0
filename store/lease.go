package store

import (
	"fmt"
	"sync"
	"time"

	"github.com/layerfs/layerfs/object"
)

// Lease pins a Commit for a Workspace: its lower view stays that Commit,
// and the Commit stays reachable (fsck and a future gc treat leases as
// roots), whatever happens to the branch.
type Lease struct {
	ID      string    `json:"id"`
	Commit  object.ID `json:"-"`
	Branch  string    `json:"branch"`
	Holder  string    `json:"holder"` // who holds it: a daemon's host:pid or state dir
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

// SetLease records or moves lease id to commit.
func (s *Store) SetLease(id, branch, holder string, commit object.ID) error {
	return s.Update(func(tx *RefTx) error { return tx.SetLease(id, branch, holder, commit) })
}

// SetLease records or moves lease id to commit within the transaction: a
// Workspace's commit moves its lease in the transaction that lands it.
func (t *RefTx) SetLease(id, branch, holder string, commit object.ID) error {
	_, err := stmt(t.ctx, t.tx, t.s.wstmts.setLease).ExecContext(t.ctx, id, commit[:], branch, holder, t.now, t.now)
	if err != nil {
		return fmt.Errorf("lease %s: %w", id, err)
	}
	return nil
}

// DropLease releases lease id; a missing lease is not an error.
func (s *Store) DropLease(id string) error {
	return s.Update(func(tx *RefTx) error {
		_, err := stmt(tx.ctx, tx.tx, tx.s.wstmts.dropLease).ExecContext(tx.ctx, id)
		return err
	})
}

// leaseDropDelay bounds how long a lease DropLeaseSoon released may
// still be recorded when no other write comes first.
const leaseDropDelay = 20 * time.Millisecond

// leaseDrops are the leases DropLeaseSoon released and no transaction has
// deleted yet.
type leaseDrops struct {
	mu     sync.Mutex
	ids    []string
	timer  *time.Timer // flushes them, armed while ids is not empty
	closed bool        // Close wrote them: no more are queued or flushed
	// flushing counts the timer's flushes under way, which Close waits for.
	flushing sync.WaitGroup
}

// DropLeaseSoon releases lease id with the Store's next write, in this
// process, or within leaseDropDelay: a Workspace's end need not wait for
// a transaction of its own (a third of an end's time), and the next
// create's lease usually carries it. Until then the lease still pins its
// Commit, which never loses anything; Leases and Close write it first. A
// crash before that leaves the lease to its holder's next start (the
// Workspace daemon releases leases it has no Workspace for).
func (s *Store) DropLeaseSoon(id string) error {
	if err := s.writable(); err != nil {
		return fmt.Errorf("release lease %s: %w", id, err)
	}
	d := &s.drops
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return fmt.Errorf("release lease %s: the store is closed", id)
	}
	d.ids = append(d.ids, id)
	s.armLeaseFlush()
	return nil
}

// armLeaseFlush makes sure the pending drops are written within
// leaseDropDelay. s.drops.mu is held.
func (s *Store) armLeaseFlush() {
	d := &s.drops
	if d.timer != nil {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(leaseDropDelay, func() {
		d.mu.Lock()
		if d.timer == t {
			d.timer = nil
		}
		if d.closed {
			d.mu.Unlock()
			return
		}
		d.flushing.Add(1)
		d.mu.Unlock()
		defer d.flushing.Done()
		s.flushLeaseDrops()
	})
	d.timer = t
}

// take returns the pending drops for a transaction to write; with
// closing, none is queued after it.
func (d *leaseDrops) take(closing bool) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = d.closed || closing
	ids := d.ids
	d.ids = nil
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	return ids
}

// putBackLeaseDrops returns drops whose transaction did not commit, to be
// written later.
func (s *Store) putBackLeaseDrops(ids []string) {
	if len(ids) == 0 {
		return
	}
	d := &s.drops
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ids = append(ids, d.ids...)
	s.armLeaseFlush()
}

// flushLeaseDrops writes the pending drops, if any.
func (s *Store) flushLeaseDrops() error {
	s.drops.mu.Lock()
	pending := len(s.drops.ids) > 0
	s.drops.mu.Unlock()
	if !pending {
		return nil
	}
	return s.Update(func(*RefTx) error { return nil }) // Update writes them
}

// writeLeaseDrops deletes ids within the transaction.
func (t *RefTx) writeLeaseDrops(ids []string) error {
	for _, id := range ids {
		if _, err := stmt(t.ctx, t.tx, t.s.wstmts.dropLease).ExecContext(t.ctx, id); err != nil {
			return fmt.Errorf("release lease %s: %w", id, err)
		}
	}
	return nil
}

// Leases lists every lease.
func (s *Store) Leases() ([]Lease, error) {
	if err := s.flushLeaseDrops(); err != nil {
		return nil, err
	}
	rows, err := s.r.Query(`SELECT id, commit_id, branch, holder, created, updated FROM leases ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	defer rows.Close()
	var out []Lease
	for rows.Next() {
		var l Lease
		var commit []byte
		var created, updated int64
		if err := rows.Scan(&l.ID, &commit, &l.Branch, &l.Holder, &created, &updated); err != nil {
			return nil, err
		}
		l.Commit, _ = object.FromBytes(commit)
		l.Created, l.Updated = time.Unix(0, created), time.Unix(0, updated)
		out = append(out, l)
	}
	return out, rows.Err()
}
