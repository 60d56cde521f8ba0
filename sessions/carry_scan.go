package sessions

import (
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/internal/longpath"
	"github.com/layerfs/layerfs/internal/ovl"
)

// keptScan finds, below the entries a commit carries (carry), what takes
// anything from the lower layer: metacopy files and renamed directories.
// Those are few, and appear only where an entry was copied up or moved
// in; what a carry keeps is mostly build output and dependencies, tens
// of thousands of files made in the Workspace and kept commit after
// commit. Reading an xattr of each, every commit, cost a one-line commit
// beside 30,000 of them ~150 ms. So it remembers each directory it read
// whose own entries hold neither (seenDir), by inode and ctime: a
// directory gains an entry only by a change that moves its ctime — a
// create, a rename in, a copy-up from the lower layer — so while both
// match, its entries are as they were, and only its subdirectories need
// a look (an lstat each). A directory changed within the last second is
// not remembered: a change in the same tick of a coarse clock could
// leave its ctime as it was.
type keptScan struct {
	upper string
	has   func(path, name string) (bool, error) // ovl.Has
	// settled is the ctime (ns) a directory must be older than to be
	// remembered.
	settled int64
	// seen is what the last scan remembered; next what this one does
	// (what it met again, and what it read).
	seen, next map[string]seenDir
	// metacopy and renamed are what the scan found, upper-relative.
	metacopy, renamed []string
	// reads counts directories read entry by entry (for tests).
	reads int
}

// seenDir is a directory whose entries were read: none a metacopy file
// or a renamed directory. subdirs are its subdirectories' names.
type seenDir struct {
	ino     uint64
	ctime   int64
	subdirs []string
}

// keptSettle is how long ago a directory must have last changed to be
// remembered.
const keptSettle = time.Second

func newKeptScan(upper string, seen map[string]seenDir) *keptScan {
	return &keptScan{upper: upper, has: hasXattrL, settled: time.Now().Add(-keptSettle).UnixNano(),
		seen: seen, next: map[string]seenDir{}}
}

// entry scans the upper entry at rel (upper-relative, a kept path).
func (s *keptScan) entry(rel string) error {
	abs := filepath.Join(s.upper, rel)
	var st unix.Stat_t
	if err := lstatL(abs, &st); err != nil {
		return goneOK(err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		_, err := s.file(rel, abs)
		return err
	case unix.S_IFDIR:
		if renamed, err := s.renamedDir(rel, abs); renamed || err != nil {
			return err
		}
		return s.dir(rel, &st)
	}
	return nil
}

// file notes a metacopy file, and reports whether it was one.
func (s *keptScan) file(rel, abs string) (bool, error) {
	has, err := s.has(abs, ovl.Metacopy)
	if has {
		s.metacopy = append(s.metacopy, rel)
	}
	return has, goneOK(err)
}

// renamedDir notes a renamed directory, and reports whether it was one.
func (s *keptScan) renamedDir(rel, abs string) (bool, error) {
	has, err := s.has(abs, ovl.Redirect)
	if has {
		s.renamed = append(s.renamed, rel)
	}
	return has, goneOK(err)
}

// dir scans directory rel, whose lstat is st: its subdirectories only,
// if it is as the last scan saw it, else all of its entries.
func (s *keptScan) dir(rel string, st *unix.Stat_t) error {
	d, ok := s.seen[rel]
	if !ok || d.ino != st.Ino || d.ctime != st.Ctim.Nano() {
		return s.read(rel, st)
	}
	s.next[rel] = d
	for _, name := range d.subdirs {
		sub := filepath.Join(rel, name)
		var sst unix.Stat_t
		if err := lstatL(filepath.Join(s.upper, sub), &sst); err != nil || sst.Mode&unix.S_IFMT != unix.S_IFDIR {
			// Gone from a directory that did not change: not as it
			// was seen after all. Read it entry by entry.
			delete(s.next, rel)
			return s.read(rel, st)
		}
		if err := s.dir(sub, &sst); err != nil {
			return err
		}
	}
	return nil
}

// read scans directory rel entry by entry, and remembers it if none of
// its entries takes anything from the lower layer.
func (s *keptScan) read(rel string, st *unix.Stat_t) error {
	s.reads++
	abs := filepath.Join(s.upper, rel)
	f, err := longpath.Open(abs, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return goneOK(err)
	}
	entries, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return goneOK(err)
	}
	clean := true
	var subdirs []string
	for _, e := range entries {
		sub, subAbs := filepath.Join(rel, e.Name()), filepath.Join(abs, e.Name())
		switch {
		case e.Type().IsRegular():
			found, err := s.file(sub, subAbs)
			if err != nil {
				return err
			}
			clean = clean && !found
		case e.IsDir():
			renamed, err := s.renamedDir(sub, subAbs)
			if err != nil {
				return err
			}
			if renamed {
				clean = false
				continue
			}
			var sst unix.Stat_t
			if err := lstatL(subAbs, &sst); err != nil {
				if err := goneOK(err); err != nil {
					return err
				}
				clean = false // changed meanwhile
				continue
			}
			subdirs = append(subdirs, e.Name())
			if err := s.dir(sub, &sst); err != nil {
				return err
			}
		}
	}
	if clean && st.Ctim.Nano() < s.settled {
		s.next[rel] = seenDir{ino: st.Ino, ctime: st.Ctim.Nano(), subdirs: subdirs}
	}
	return nil
}
