package layerfs

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// scanDir is one directory found by the scan, with its entries in name
// order. Files get their content ID filled in by the savers.
type scanDir struct {
	entries []scanEntry
}

type scanEntry struct {
	store.Entry
	abs string   // absolute path, for files
	dir *scanDir // for directories
}

// scan is what the walk of a directory found.
type scan struct {
	root    *scanDir
	files   []*scanEntry
	dirs    int
	links   int
	bytes   int64
	skipped []string // fifos, sockets, devices: not captured
	// storeFiles are the Store's file and its SQLite companions, by
	// device and inode: not captured, listed in excluded.
	storeFiles map[[2]uint64]bool
	excluded   []string
}

// scanTree walks dir without following symlinks and records every entry's
// metadata, leaving out the Store at storePath if dir holds it. It reads
// no file contents.
func scanTree(dir, storePath string) (*scan, error) {
	fi, err := os.Stat(dir) // a symlink to the tree is followed; none below it

	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	sc := &scan{storeFiles: map[[2]uint64]bool{}}
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		var st unix.Stat_t
		if storePath != "" && unix.Stat(storePath+suffix, &st) == nil {
			sc.storeFiles[[2]uint64{st.Dev, st.Ino}] = true
		}
	}
	sc.root, err = sc.walk(dir, "")
	return sc, err
}

func (sc *scan) walk(abs, rel string) (*scanDir, error) {
	names, err := readNames(abs)
	if err != nil {
		return nil, err
	}
	d := &scanDir{entries: make([]scanEntry, 0, len(names))}
	for _, name := range names {
		e, ok, err := sc.entry(filepath.Join(abs, name), joinRel(rel, name), name)
		if err != nil {
			return nil, err
		}
		if ok {
			d.entries = append(d.entries, e)
		}
	}
	for i := range d.entries {
		if e := &d.entries[i]; e.Type == store.TypeFile {
			sc.files = append(sc.files, e)
		}
	}
	return d, nil
}

func readNames(abs string) ([]string, error) {
	f, err := openLong(abs, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	des, err := f.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("read directory %s: %w", abs, err)
	}
	names := make([]string, len(des))
	for i, de := range des {
		names[i] = de.Name()
	}
	sortNames(names)
	return names, nil
}

func joinRel(rel, name string) string {
	if rel == "" {
		return name
	}
	return rel + "/" + name
}

// entry lstats one name; ok is false for types LayerFS does not capture.
func (sc *scan) entry(abs, rel, name string) (scanEntry, bool, error) {
	var st unix.Stat_t
	if err := inDir(abs, "lstat", func(dir int, name string) error {
		return unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	}); err != nil {
		return scanEntry{}, false, err
	}
	e := scanEntry{Entry: store.Entry{
		Name:  name,
		Mode:  st.Mode & 07777,
		UID:   st.Uid,
		GID:   st.Gid,
		MTime: store.MTimeOf(st.Mtim),
	}}
	if err := store.CheckName(name); err != nil {
		return e, false, fmt.Errorf("%s: %w", abs, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		if sc.storeFiles[[2]uint64{st.Dev, st.Ino}] {
			sc.excluded = append(sc.excluded, rel)
			return e, false, nil
		}
		e.Type, e.Size, e.abs = store.TypeFile, st.Size, abs
		sc.bytes += st.Size
	case unix.S_IFLNK:
		target, err := readLink(abs, st.Size)
		if err != nil {
			return e, false, err
		}
		e.Type, e.Target, e.Size = store.TypeSymlink, target, int64(len(target))
		sc.links++
	case unix.S_IFDIR:
		e.Type = store.TypeDir
		sc.dirs++
		sub, err := sc.walk(abs, rel)
		if err != nil {
			return e, false, err
		}
		e.dir = sub
	default:
		sc.skipped = append(sc.skipped, rel)
		return e, false, nil
	}
	return e, true, nil
}

// putTrees stores the scanned directories bottom-up and returns the root
// tree's ID. File entries must already carry their content IDs.
func putTrees(b *store.Batch, d *scanDir) (object.ID, error) {
	t := &store.Tree{Entries: make([]store.Entry, len(d.entries))}
	for i := range d.entries {
		e := &d.entries[i]
		if e.Type == store.TypeDir {
			id, err := putTrees(b, e.dir)
			if err != nil {
				return object.Zero, err
			}
			e.ID = id
		}
		t.Entries[i] = e.Entry
	}
	return b.PutTree(t)
}

// readLink reads the symlink at abs, of any length (see inDir), whose
// target lstat gave as size bytes.
func readLink(abs string, size int64) (string, error) {
	buf := make([]byte, max(size, 255)+1)
	var n int
	err := inDir(abs, "readlink", func(dir int, name string) error {
		var err error
		n, err = unix.Readlinkat(dir, name, buf)
		return err
	})
	if err != nil {
		return "", err
	}
	if n == len(buf) { // it grew since the lstat: read it again
		return readLink(abs, 2*int64(len(buf)))
	}
	return string(buf[:n]), nil
}
