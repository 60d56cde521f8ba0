package store

import (
	"fmt"
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

// Leases lists every lease.
func (s *Store) Leases() ([]Lease, error) {
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
