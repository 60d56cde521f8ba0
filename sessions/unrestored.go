package sessions

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// endUnrestored ends a Workspace restore could not bring back (unrestore)
// for good, if discard is set: the way out for a user who will not, or
// cannot, fix what stops its restore. Its uncommitted changes, which
// cannot be seen without its overlay, go with it; without discard it is
// refused, as an end of a Workspace with changes is. ok is false if id
// names no such Workspace.
//
// Its directory is marked ended first, as End's is: a crash, or a failed
// release of its Lease, after that leaves the next start to remove it and
// release its Lease (dropOrphanLeases) rather than to try it again.
func (d *Daemon) endUnrestored(id string, discard bool) (ok bool, err error) {
	d.mu.Lock()
	u, ok := d.unrestored[id]
	ok = ok && !d.closed // get says the daemon is shutting down
	if ok && discard {
		delete(d.unrestored, id) // this end's: a second one finds it gone
	}
	d.mu.Unlock()
	if !ok {
		return false, nil
	}
	if !discard {
		return true, fmt.Errorf("end %s: %w: the daemon could not restore it at its start (%s), so they cannot be seen; "+
			"fix that and restart the daemon to get them back (its files are in %s), or end with discard (ws end --discard, ?discard=1) to remove it and them for good",
			id, ErrDirty, u.Error, u.Dir)
	}
	if err := markEnded(u.Dir); err != nil {
		d.mu.Lock()
		d.unrestored[id] = u
		d.mu.Unlock()
		return true, fmt.Errorf("end %s: %w", id, err)
	}
	d.log.Printf("workspace %s, not restored (%s), ended with discard: its directory %s is removed", id, u.Error, u.Dir)
	host := d.dir("mnt", id)
	err = unmount(host) // restore detached it (cleanStaleMounts, detach): in case
	removeInBackground(u.Dir, host)
	err = errors.Join(err, d.s.DropLease(id))
	d.metrics.ended.Add(1)
	if err != nil {
		return true, fmt.Errorf("end %s: %w", id, err)
	}
	return true, nil
}

// markEnded marks a Workspace directory as ended (isEnded): its record
// becomes the marker, or, should it be gone or not renamable, an empty
// marker is written beside it.
func markEnded(dir string) error {
	if err := os.Rename(filepath.Join(dir, "state.json"), filepath.Join(dir, endedMarker)); err == nil {
		return nil
	}
	if err := os.WriteFile(filepath.Join(dir, endedMarker), nil, 0o600); err != nil {
		return fmt.Errorf("mark %s ended: %w", dir, err)
	}
	return nil
}
