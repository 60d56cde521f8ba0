package publish

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/extents"
	"github.com/layerfs/layerfs/internal/ovl"
	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// Capture is what a walk of an upperdir found: a Changeset against the
// Commit the overlay's lower layer shows, and the content it staged.
type Capture struct {
	Changes *Changeset
	Content *store.Stage
	// Receipt figures.
	Paths       int   // paths captured as changes
	BytesHashed int64 // file bytes read and hashed
	Skipped     []string
	// Unchanged lists files and symlinks copied up without a change: they
	// shadow the lower layer's version, so moving the upperdir onto a newer
	// Commit must drop them first.
	Unchanged []string
	// Metacopy lists the files overlayfs copied up metadata only: their
	// content is the lower layer's, so moving the upperdir onto a newer
	// Commit must copy their data up first.
	Metacopy []string
	// Ignored lists the paths in the upperdir that the ignore rules left
	// out, unread: they may hold metacopy files and renamed directories too,
	// which moving the upperdir onto a newer Commit must copy up first.
	Ignored []string
	// Clones are data files in the making (see DataLayer), one per big
	// file the Workspace modified: the caller keeps them if the Changes
	// land, and removes them if not.
	Clones   []Clone
	Duration time.Duration
}

// DataFileMin is the size from which capture makes a data file of a big
// file a Workspace modified: below it, copying a file up through the
// Store's FUSE mount costs about as much as cloning it.
const DataFileMin = 1 << 20

// A Clone is a data file of content ID in the making: a clone of an
// upper file, at Tmp, or one still to make once the Commit lands (Later,
// Make; see patchThenClone).
type Clone struct {
	Tmp   string
	ID    object.ID
	later *later
}

// A DataLayer keeps data files, on the upperdir's filesystem, of some big
// files' content: overlayfs's data-only layer below a Workspace (see
// fusefs.Options.DataRedirect). A file copied up from such a layer is a
// clone sharing its blocks, so capture compares block maps, not bytes
// (capture_extents.go). Capture makes the data file of a big file the
// Workspace modified by cloning it, before it reads it or, when block
// maps show what changed, once the Commit lands (Clone.Make); it lists
// them in Capture.Clones. New files get none.
type DataLayer interface {
	// DataFile returns the path of content id's data file, or "".
	DataFile(id object.ID) string
	// Clone clones f to a new file and returns its path.
	Clone(f *os.File) (string, error)
}

// Upper is an overlayfs upperdir to capture.
type Upper struct {
	Dir string
	// Base is the Commit the overlay's lower layer shows.
	Base object.ID
	// Lower, if not empty, is a directory showing Base's tree (the
	// overlay's lowerdir): a big file's lower version is compared there,
	// in the page cache, rather than by hashing (see capture_compare.go).
	Lower string
	// Data, if not nil, is the overlay's data-only layer.
	Data DataLayer
	// Ignore matches paths left out, whatever they hold (the branch's
	// /.layerfsignore; nil: none).
	Ignore *Rules
}

// CaptureUpper walks an upperdir and turns what it holds into changes:
// new and changed files (only chunks that differ from what the Store
// holds become new objects), symlinks, modes, mtimes, new directories,
// whiteouts (the 0/0 character device and the xattr form) as deletes,
// opaque directories, renamed directories (redirect_dir), and metacopy
// files (metadata changed, content the lower's, maybe renamed). Files
// copied up without a change are left out. It reads only the upperdir,
// never the whole tree.
func CaptureUpper(s *store.Store, u Upper) (*Capture, error) {
	stage := s.NewStage()
	return capture(s, u, stage, stage)
}

// CaptureUpperDry finds the same changes as CaptureUpper but stores
// nothing: it answers "what is uncommitted?". Its Content is nil, and its
// Changes must not be published.
func CaptureUpperDry(s *store.Store, u Upper) (*Capture, error) {
	return capture(s, u, hashOnly{s}, nil)
}

// CaptureUncommitted finds only what a capture leaves out of a Commit —
// its Ignored and Skipped paths — reading no file: it answers "what would
// a discard keep?". A special file in place of a lower entry is not among
// them: a commit takes that entry's removal, which a discard drops. Its
// Changes are partial and must not be published.
func CaptureUncommitted(s *store.Store, u Upper) (*Capture, error) {
	return capture(s, u, nil, nil)
}

// capture walks u; a nil content reads no file (CaptureUncommitted).
func capture(s *store.Store, u Upper, content extents.Store, stage *store.Stage) (*Capture, error) {
	start := time.Now()
	if stage != nil {
		// Back as it was before the Stage reaches Publish, which may read
		// it inside its transaction (and turns it off itself).
		defer stage.ReadThroughWriter(stage.ReadThroughWriter(true))
	}
	c, err := s.Commit(u.Base)
	if err != nil {
		return nil, fmt.Errorf("capture: base: %w", err)
	}
	cw := &capturer{s: s, root: c.Tree, lowerDir: u.Lower, data: u.Data, content: content, ignore: u.Ignore,
		cap: &Capture{Changes: &Changeset{Base: u.Base}, Content: stage}}
	root, err := os.Open(u.Dir)
	if err == nil {
		err = cw.dir(root, "", "", c.Tree)
		root.Close()
	}
	if err != nil {
		for _, c := range cw.cap.Clones {
			if c.Later() {
				c.Release()
			} else {
				os.Remove(c.Tmp) // their Changes will not be published
			}
		}
		return nil, fmt.Errorf("capture %s: %w", u.Dir, err)
	}
	cw.cap.Paths = len(cw.cap.Changes.Changes)
	cw.cap.Duration = time.Since(start)
	return cw.cap, nil
}

type capturer struct {
	s        *store.Store
	root     object.ID
	lowerDir string        // shows root's tree; empty: none
	data     DataLayer     // nil: none
	content  extents.Store // where file content goes: a Stage, nowhere (hashOnly), or nil: not read
	ignore   *Rules
	cap      *Capture
}

func (cw *capturer) add(c Change) {
	cw.cap.Changes.Changes = append(cw.cap.Changes.Changes, c)
}

// dir captures upper directory d at path, which shows the lower tree
// found at lowerPath (zero: none; lowerPath differs from path below a
// renamed directory). Entries are found relative to their directory's
// descriptor, never by a path from the root: the upperdir's own path and
// a path of up to 4095 bytes in it may together be longer than Linux's
// PATH_MAX.
func (cw *capturer) dir(d *os.File, path, lowerPath string, lower object.ID) error {
	lt := &store.Tree{}
	if !lower.IsZero() {
		var err error
		if lt, err = cw.s.Tree(lower); err != nil {
			return err
		}
	}
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, name := range names {
		var le *store.Entry
		if e, ok := lt.Lookup(name); ok {
			le = e
		}
		if err := cw.entry(d, joinPath(path, name), joinPath(lowerPath, name), le); err != nil {
			return err
		}
	}
	return nil
}

// entry captures the entry at path in upper directory parent.
func (cw *capturer) entry(parent *os.File, path, lowerPath string, lower *store.Entry) error {
	name := lastName(path)
	var st unix.Stat_t
	if err := unix.Fstatat(int(parent.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return vanished(fmt.Errorf("lstat %s: %w", path, err))
	}
	afterLstat.call(path)
	if err := store.CheckName(name); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if cw.ignore.Match(path, st.Mode&unix.S_IFMT == unix.S_IFDIR) {
		cw.cap.Ignored = append(cw.cap.Ignored, path)
		return nil
	}
	e := entryOf(name, &st)
	if kind := st.Mode & unix.S_IFMT; cw.content == nil && (kind == unix.S_IFREG || kind == unix.S_IFLNK) {
		return nil // CaptureUncommitted: a file, symlink or whiteout a commit takes
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFCHR:
		if st.Rdev == 0 {
			return cw.whiteout(path, lower)
		}
	case unix.S_IFREG:
		f, err := openIn(parent, name, 0)
		if err != nil {
			return replaced(path, err)
		}
		defer f.Close()
		if st.Size == 0 {
			if w, err := ovl.FHas(int(f.Fd()), path, ovl.Whiteout); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			} else if w {
				return cw.whiteout(path, lower)
			}
		}
		return cw.file(f, path, lowerPath, e, lower)
	case unix.S_IFLNK:
		return cw.symlink(parent, path, e, lower)
	case unix.S_IFDIR:
		d, err := openIn(parent, name, unix.O_DIRECTORY)
		if err != nil {
			return replaced(path, err)
		}
		defer d.Close()
		return cw.directory(d, path, lowerPath, e, lower)
	}
	// A FIFO, socket or device, which a Store does not hold: the
	// Workspace keeps it. What it took the place of is gone, as on any
	// filesystem: a commit that left the lower entry standing would keep
	// a file the Workspace no longer has. For a discard
	// (CaptureUncommitted) that removal is a change like any other, which
	// it drops, special file and all, so the lower entry shows again.
	if lower != nil && cw.content == nil {
		return nil
	}
	cw.cap.Skipped = append(cw.cap.Skipped, path)
	return cw.whiteout(path, lower)
}

func entryOf(name string, st *unix.Stat_t) store.Entry {
	return store.Entry{Name: name, Mode: st.Mode & 07777, UID: st.Uid, GID: st.Gid, MTime: store.MTimeOf(st.Mtim)}
}

func (cw *capturer) whiteout(path string, lower *store.Entry) error {
	if lower != nil {
		cw.add(Change{Path: path})
	}
	return nil
}

// file captures upper file f at path.
func (cw *capturer) file(f *os.File, path, lowerPath string, e store.Entry, lower *store.Entry) error {
	e.Type = store.TypeFile
	if meta, err := ovl.FHas(int(f.Fd()), path, ovl.Metacopy); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	} else if meta {
		return cw.metacopy(f, path, lowerPath, e, lower)
	}
	// The file read is the one opened, whatever was at path when its
	// directory was read: its metadata, and the size, mtime and ctime
	// that tell whether it changed while it was read (capture_changed.go).
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("%s: fstat: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%s: %w", path, ErrChanged) // a directory, put in its place since its lstat
	}
	e = entryOf(e.Name, &st)
	e.Type = store.TypeFile
	afterStat.call(path)
	var content extents.File
	var snapshot bool
	var err error
	if cw.data != nil && cw.cap.Content != nil && lower != nil && lower.Type == store.TypeFile && st.Size >= DataFileMin {
		content, snapshot, err = cw.cloned(f, st.Size, lowerPath, &e, lower)
	} else {
		content, err = cw.fileContent(f, st.Size, lowerPath, &e, lower, true)
	}
	if !snapshot && (err != nil || cw.cap.Content != nil) {
		// A dry capture, never published, takes what it read.
		err = checkUnchanged(f, &st, content, err)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return cw.captured(path, e, lower, content)
}

// cloned stores the content of a big upper file f, about size bytes,
// that replaced lower, and makes a data file of it: a clone whose bytes
// are exactly the content stored, or none. If f was copied up by cloning
// lower's data file, its block map shows what changed: those ranges are
// read from f, and the data file is made once the Commit lands
// (patchThenClone). Otherwise f is cloned first; if the clone's block map
// shows what changed after all, the changed ranges are read from the
// clone, at the clone's size. Else capture reads f, whose pages are
// cached, and keeps the clone only if f still shares every block with it
// afterwards and has its size: nothing wrote f since the clone, so what
// capture read is the clone's bytes. snapshot says the content was read
// from the clone, which nothing writes, rather than from f.
func (cw *capturer) cloned(f *os.File, size int64, lowerPath string, e, lower *store.Entry) (content extents.File, snapshot bool, err error) {
	if content, ok, err := cw.patchThenClone(f, size, lower); ok || err != nil {
		return content, false, err
	}
	tmp, err := cw.data.Clone(f)
	if err != nil {
		content, err := cw.fileContent(f, size, lowerPath, e, lower, true) // no data file: copy-ups read FUSE
		return content, false, err
	}
	keep := false
	defer func() {
		if !keep {
			os.Remove(tmp)
		}
	}()
	c, err := os.Open(tmp)
	if err != nil {
		return extents.File{}, false, err
	}
	defer c.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(c.Fd()), &st); err != nil {
		return extents.File{}, false, err
	}
	cloneSize := st.Size // f may have grown or shrunk since its size was taken
	old := extents.File{ID: lower.ID, Size: lower.Size}
	ranges, err := []extents.Range(nil), errNoExtents
	if data := cw.data.DataFile(lower.ID); data != "" && lower.Size >= extents.SmallFileMax {
		ranges, err = compareExtents(c, cloneSize, data, old.Size, min(cloneSize/8, patchLimit), false)
	}
	if err == nil {
		if content, err = cw.applyRanges(c, cloneSize, old, ranges); err != nil {
			return extents.File{}, false, err
		}
		snapshot = true // read from the clone, which nothing writes
	} else {
		// The block maps were compared, through the clone: not again.
		if content, err = cw.fileContent(f, size, lowerPath, e, lower, false); err != nil {
			return extents.File{}, false, err
		}
		if content.Size != cloneSize || unix.Fstat(int(f.Fd()), &st) != nil || st.Size != cloneSize {
			return content, false, nil
		}
		if same, err := sameBlocks(f, c, cloneSize); err != nil || !same {
			return content, false, nil
		}
	}
	if content.Size == cloneSize && (content.ID != lower.ID || content.Size != lower.Size) {
		keep = true
		cw.cap.Clones = append(cw.cap.Clones, Clone{Tmp: tmp, ID: content.ID})
	}
	return content, snapshot, nil
}

// fileContent stores the content of upper file f, size bytes, whose lower
// version (nil: none) is found at lowerPath. blockMaps says whether to
// compare f's block map with the lower version's data file (patch).
func (cw *capturer) fileContent(f *os.File, size int64, lowerPath string, e, lower *store.Entry, blockMaps bool) (extents.File, error) {
	if lower != nil && lower.Type == store.TypeFile && lower.Size >= extents.SmallFileMax {
		content, ok, err := cw.patch(f, size, lowerPath, lower, blockMaps)
		if err != nil || ok {
			return content, err
		}
	} else if lower != nil && lower.Type == store.TypeFile && sameMeta(lower, e) {
		// Copied up, maybe unchanged: hash without storing and compare.
		id, n, err := cw.hash(f)
		if err != nil {
			return extents.File{}, err
		}
		if id == lower.ID && n == lower.Size {
			return extents.File{ID: id, Size: n}, nil
		}
	}
	content, err := extents.WriteAt(cw.content, f, size)
	cw.cap.BytesHashed += content.Size
	return content, err
}

// metacopy captures a file overlayfs copied up metadata only (metacopy=on:
// a chmod, a rename, a hard link): its content is its lower version's, at
// its own lower path or, renamed or linked, where its redirect says.
func (cw *capturer) metacopy(f *os.File, path, lowerPath string, e store.Entry, lower *store.Entry) error {
	cw.cap.Metacopy = append(cw.cap.Metacopy, path)
	from := lowerPath
	redirect, err := ovl.FGet(int(f.Fd()), path, ovl.Redirect)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if redirect != "" {
		from = redirectSource(lowerPath, redirect)
	}
	src := lower
	if from != lowerPath {
		se, err := cw.s.Lookup(cw.root, from)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("%s: metadata copied up from %s: %w", path, from, err)
		}
		src = &se
		if err != nil {
			src = nil
		}
	}
	if src == nil || src.Type != store.TypeFile {
		return fmt.Errorf("%s: metadata copied up from %s, which the lower layer lacks as a file: %w", path, from, store.ErrCorrupt)
	}
	return cw.captured(path, e, lower, extents.File{ID: src.ID, Size: src.Size})
}

// captured records a file's new entry, or that it is unchanged.
func (cw *capturer) captured(path string, e store.Entry, lower *store.Entry, content extents.File) error {
	e.ID, e.Size = content.ID, content.Size
	if lower != nil && lower.Type == store.TypeFile && lower.ID == e.ID && lower.Size == e.Size && sameMeta(lower, &e) {
		cw.cap.Unchanged = append(cw.cap.Unchanged, path)
		return nil
	}
	cw.add(Change{Path: path, Entry: &e})
	return nil
}

// patchLimit bounds how many changed bytes within a big file's old length
// capture looks for before it writes the file whole instead of patching
// the lower version: content shifted by an insertion differs everywhere.
const patchLimit = 4 << 20

// patch captures a big file of size bytes whose lower version is lower by
// comparing the two chunk by chunk and storing only the chunks around the
// ranges that changed (extents.Diff, extents.Patch): a 10-byte overwrite
// of a copied-up file costs about a chunk, not the file. It reports false
// when the file differs too much for that to pay; then it must be written
// whole.
func (cw *capturer) patch(f *os.File, size int64, lowerPath string, lower *store.Entry, blockMaps bool) (extents.File, bool, error) {
	old := extents.File{ID: lower.ID, Size: lower.Size}
	limit := min(size/8, patchLimit)
	// Where the lower version's bytes may be in the page cache: its data
	// file, which a Workspace over a data layer reads, and the FUSE mount.
	var lowers []string
	var ranges []extents.Range
	var err error
	if data := cw.dataFile(lower.ID); data != "" {
		if blockMaps {
			// Maybe copied up by cloning data: compare block maps.
			ranges, err = compareExtents(f, size, data, old.Size, limit, true)
			if err == nil {
				g, err := cw.applyRanges(f, size, old, ranges)
				return g, err == nil, err
			}
		}
		lowers = append(lowers, data)
	}
	if cw.lowerDir != "" {
		lowers = append(lowers, filepath.Join(cw.lowerDir, filepath.FromSlash(lowerPath)))
	}
	if size != old.Size {
		for _, l := range lowers {
			if g, ok, err := cw.splice(f, size, l, old); ok || err != nil {
				return g, ok, err
			}
		}
	}
	err = errNotResident
	for _, l := range lowers {
		if ranges, err = compareLower(f, size, l, old.Size, limit); err == nil || errors.Is(err, extents.ErrTooDifferent) {
			break
		}
	}
	if err != nil && !errors.Is(err, extents.ErrTooDifferent) {
		ranges, err = extents.Diff(cw.s, old, f, size, limit)
	}
	if errors.Is(err, extents.ErrTooDifferent) {
		return extents.File{}, false, nil
	}
	if err != nil {
		return extents.File{}, false, err
	}
	cw.cap.BytesHashed += size
	if len(ranges) == 0 && size == old.Size {
		return old, true, nil
	}
	g, err := extents.Patch(cw.content, old, f, size, ranges)
	return g, err == nil, err
}

// applyRanges stores the version of old, size bytes read from src, that
// differs from it only within ranges, found by block maps: only the
// ranges are read.
func (cw *capturer) applyRanges(src io.ReaderAt, size int64, old extents.File, ranges []extents.Range) (extents.File, error) {
	for _, r := range ranges {
		cw.cap.BytesHashed += r.Len
	}
	if len(ranges) == 0 && size == old.Size {
		return old, nil
	}
	return extents.Patch(cw.content, old, src, size, ranges)
}

func (cw *capturer) dataFile(id object.ID) string {
	if cw.data == nil {
		return ""
	}
	return cw.data.DataFile(id)
}

// splice captures a big file whose size changed as one splice of its
// lower version, when the two share all but one run of bytes — an
// insertion or deletion anywhere, such as a prepend, which shifts every
// byte after it and so defeats comparing at the same offsets. It reports
// false, without error, when it cannot tell or the run is too long.
func (cw *capturer) splice(f *os.File, size int64, lowerAbs string, old extents.File) (extents.File, bool, error) {
	off, del, ins, err := spliceLower(f, size, lowerAbs, old.Size)
	if err != nil || ins > spliceMax {
		return extents.File{}, false, nil
	}
	data := make([]byte, ins)
	if _, err := f.ReadAt(data, off); err != nil {
		return extents.File{}, false, fmt.Errorf("read at %d: %w", off, err)
	}
	g, err := extents.Splice(cw.content, old, off, del, data)
	if err != nil {
		return extents.File{}, false, err
	}
	cw.cap.BytesHashed += size
	return g, true, nil
}

// sameMeta reports whether a lower entry and an upper one agree on
// everything but content.
func sameMeta(a, b *store.Entry) bool {
	return a.Mode == b.Mode && a.UID == b.UID && a.GID == b.GID && a.MTime == b.MTime
}

func (cw *capturer) hash(r io.Reader) (object.ID, int64, error) {
	f, err := extents.Write(hashOnly{cw.s}, r)
	cw.cap.BytesHashed += f.Size
	return f.ID, f.Size, err
}

// symlink captures the symlink at path in upper directory parent.
func (cw *capturer) symlink(parent *os.File, path string, e store.Entry, lower *store.Entry) error {
	target, err := readlinkIn(parent, lastName(path))
	if errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("%s: %w", path, ErrChanged) // no longer a symlink
	}
	if err != nil {
		return vanished(fmt.Errorf("readlink %s: %w", path, err))
	}
	e.Type, e.Target, e.Size = store.TypeSymlink, target, int64(len(target))
	if lower != nil && lower.Type == store.TypeSymlink && lower.Target == target && sameMeta(lower, &e) {
		cw.cap.Unchanged = append(cw.cap.Unchanged, path)
		return nil
	}
	cw.add(Change{Path: path, Entry: &e})
	return nil
}

// directory captures upper directory d at path.
func (cw *capturer) directory(d *os.File, path, lowerPath string, e store.Entry, lower *store.Entry) error {
	e.Type = store.TypeDir
	redirect, err := ovl.FGet(int(d.Fd()), path, ovl.Redirect)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if redirect != "" {
		return cw.redirected(d, path, lowerPath, e, redirect)
	}
	opaqueX, err := ovl.FGet(int(d.Fd()), path, ovl.Opaque)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	opaque := opaqueX == "y"
	if lower == nil || lower.Type != store.TypeDir || opaque {
		cw.add(Change{Path: path, Entry: &e, Opaque: lower != nil})
		return cw.dir(d, path, "", object.Zero)
	}
	if e.Mode != lower.Mode || e.UID != lower.UID || e.GID != lower.GID || e.MTime != lower.MTime {
		cw.add(Change{Path: path, Entry: &e}) // its own metadata; children as they are
	}
	return cw.dir(d, path, lowerPath, lower.ID)
}

// redirected captures a directory renamed from another lower path: it
// holds that directory's tree, with this upper directory's changes on top.
// An absolute redirect names the lower path from the root; a relative one
// a sibling in the lower parent.
func (cw *capturer) redirected(d *os.File, path, lowerPath string, e store.Entry, redirect string) error {
	from := redirectSource(lowerPath, redirect)
	src, err := cw.s.Lookup(cw.root, from)
	if cw.content == nil && (errors.Is(err, store.ErrNotFound) || err == nil && src.Type != store.TypeDir) {
		// CaptureUncommitted: what lies below is all that matters, and
		// an answer beats an error (a discard asks it).
		return cw.dir(d, path, "", object.Zero)
	}
	if err != nil || src.Type != store.TypeDir {
		return fmt.Errorf("%s: renamed from %s, which the lower layer lacks: %w", path, from, errors.Join(err, store.ErrCorrupt))
	}
	e.ID = src.ID
	cw.add(Change{Path: path, Entry: &e, From: from})
	return cw.dir(d, path, from, src.ID)
}

// redirectSource is the lower path an overlayfs redirect names for an
// entry at lowerPath: an absolute redirect names it from the root, a
// relative one a sibling in the lower parent.
func redirectSource(lowerPath, redirect string) string {
	if strings.HasPrefix(redirect, "/") {
		return strings.TrimPrefix(redirect, "/")
	}
	return joinPath(parentPath(lowerPath), redirect)
}

func parentPath(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

// hashOnly is an extents.Store that names objects without keeping them:
// capture uses it to tell whether a copied-up file changed. It reads what
// the Store holds, which patching a big file needs.
type hashOnly struct{ s *store.Store }

func (hashOnly) PutChunk(data []byte, _ object.ID) (object.ID, error) {
	return object.Sum(object.KindChunk, data), nil
}
func (hashOnly) PutNode(data []byte) (object.ID, error) {
	return object.Sum(object.KindExtent, data), nil
}
func (h hashOnly) Get(id object.ID, k object.Kind) ([]byte, error) {
	if h.s == nil {
		return nil, errors.New("hash-only store holds nothing")
	}
	return h.s.Get(id, k)
}
