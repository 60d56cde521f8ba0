package sessions

import (
	"os"
	"path/filepath"

	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/publish"
	"github.com/layerfs/layerfs/store"
)

// After a commit, the Workspace's new overlay stacks on a new Commit, whose
// version of each changed file is a new inode in the Store's FUSE mount,
// with nothing in the kernel's page cache. The next command to write such a
// file copies it up whole, reading it through FUSE: for a 32 MiB file that
// was 118 ms of a 10-byte edit's exec against 46 ms when the new version was
// already cached (a plain overlay over ext4 takes ~30 ms). So, in the
// background, a commit puts the big files it modified into the mount's page
// cache (fusefs.Server.CacheFile: notify-store messages, no FUSE request per
// read) while the agent reads the result and plans its next command. The
// bytes are what the Store serves — never the old upperdir, which a process
// that outlived the commit could still be writing — so the cache holds only
// the Commit's bytes.
//
// Only files the Workspace already had (a modified file was in its page
// cache as the old version) of at least warmMin bytes are cached, at most
// warmMax bytes per commit: a new file, or one the agent never read, is
// left for whoever reads it.
const (
	warmMin = 1 << 20
	warmMax = 256 << 20
)

// warmPaths lists the files of the new Commit worth caching: big regular
// files the changes rewrote that were in the old lease too. It also lists
// those it leaves out because a data file holds their content (primed):
// for them the mount only answers the lookup.
func warmPaths(s *store.Store, oldLease object.ID, cs *publish.Changeset, data *dataLayer) (cached, primed []string) {
	old, err := s.Commit(oldLease)
	if err != nil {
		return nil, nil
	}
	var total int64
	for _, c := range cs.Changes {
		e := c.Entry
		if !bigFile(e) || total+e.Size > warmMax {
			continue
		}
		if data != nil && data.holds(e.ID) {
			primed = append(primed, c.Path) // read and copied up from its data file, never the mount
			continue
		}
		if was, err := s.Lookup(old.Tree, c.Path); err != nil || was.Type != store.TypeFile {
			continue
		}
		cached = append(cached, c.Path)
		total += e.Size
	}
	return cached, primed
}

// bigFile reports whether a change's new entry is a file big enough to
// read ahead (warm) and to look up ahead (lookUpAhead).
func bigFile(e *store.Entry) bool {
	return e != nil && e.Type == store.TypeFile && e.Size >= warmMin
}

// warm puts the big files cs modified, as commit holds them, into the
// page cache of the Store's FUSE mount, in the background; Close waits for
// it before unmounting, and once Close has begun there is none.
func (d *Daemon) warm(oldLease, commit object.ID, cs *publish.Changeset) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	d.warming.Add(1) // before Close's Wait: Close marks closed under d.mu first
	srv := d.fuse
	d.mu.Unlock()
	go func() {
		defer d.warming.Done()
		cached, primed := warmPaths(d.s, oldLease, cs, d.data)
		// A big file with a data file is copied up from it, but the
		// overlay still looks it up in the mount first. Views stack on
		// Slots, whose directories are their own, so this lookup does not
		// spare theirs a FUSE request (lookUpAhead does that); it reads the
		// new Commit's trees into the mount's cache, which theirs then hit.
		for _, p := range primed {
			os.Lstat(d.dir("lower", commit.String(), filepath.FromSlash(p)))
		}
		for _, p := range cached {
			if err := srv.CacheFile(commit, p); err != nil {
				d.log.Printf("cache %s:%s: %v", commit.Short(), p, err)
			}
		}
	}()
}
