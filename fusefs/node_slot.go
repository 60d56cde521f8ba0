package fusefs

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/layerfs/layerfs/object"
)

// slotsName is the all-commits root's hidden directory of Slots.
const slotsName = ".slots"

// A Slot is a directory of an all-commits mount, <mnt>/.slots/<n>, that
// shows a Commit chosen after the directory was looked up: empty and
// unreadable (EIO) until Bind, then the Commit's tree for good. It lets an
// overlay be mounted over a Commit that does not exist yet: the Workspace
// daemon mounts its next overlay over a Slot while a commit captures and
// publishes, and binds the Slot to the Commit that lands. Only the Slot's
// root may be asked about before Bind (overlayfs's mount asks for its
// attributes and the filesystem's). A Slot's directories are its own
// nodes, never those of <mnt>/<commit-id>/ (no directory has two
// parents); its files are shared with every other tree, as always.
type Slot struct {
	fsys *fileSystem
	dir  *slotDir
	name string
	path string
}

// NewSlot makes an unbound Slot. Release it when no mount uses it any more.
func (s *Server) NewSlot() (*Slot, error) {
	if _, ok := s.root.(*commitsRoot); !ok {
		return nil, errors.New("slot: not a mount of all Commits")
	}
	fsys := s.fsys
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	fsys.slotSeq++
	name := strconv.FormatUint(fsys.slotSeq, 10)
	d := &slotDir{treeDir: treeDir{fsys: fsys, slot: name}}
	if fsys.slots == nil {
		fsys.slots = map[string]*slotDir{}
	}
	fsys.slots[name] = d
	return &Slot{fsys: fsys, dir: d, name: name, path: filepath.Join(s.mnt, slotsName, name)}, nil
}

// Path is the Slot's directory.
func (sl *Slot) Path() string { return sl.path }

// Bind makes the Slot show commit, once.
func (sl *Slot) Bind(commit object.ID) error {
	v, err := sl.fsys.view(commit)
	if err != nil {
		return fmt.Errorf("bind slot %s: %w", sl.name, err)
	}
	d := sl.dir
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.bound {
		return fmt.Errorf("bind slot %s to %s: bound to %s already", sl.name, commit.Short(), d.view.Commit().Short())
	}
	d.view, d.e, d.bound = v, v.Root(), true
	return nil
}

// Release forgets the Slot's name: a new lookup of it fails (the kernel
// may still know it, for as long as it keeps entries). A mount that holds
// it keeps what it shows.
func (sl *Slot) Release() {
	sl.fsys.mu.Lock()
	defer sl.fsys.mu.Unlock()
	if sl.fsys.slots[sl.name] == sl.dir {
		delete(sl.fsys.slots, sl.name)
	}
}

// slotsDir is .slots/: its entries are the Slots not released, reached
// by name only.
type slotsDir struct {
	fs.Inode
	readOnly
	fsys *fileSystem
}

var (
	_ = (fs.NodeGetattrer)((*slotsDir)(nil))
	_ = (fs.NodeLookuper)((*slotsDir)(nil))
	_ = (fs.NodeReaddirer)((*slotsDir)(nil))
	_ = (fs.NodeOnForgetter)((*slotsDir)(nil))
)

func newSlotsDir(ctx context.Context, fsys *fileSystem, parent *fs.Inode, out *fuse.EntryOut) *fs.Inode {
	ino := fsys.inos.ino(syntheticIdentity('S', ""))
	fillSyntheticDir(&out.Attr, ino, fsys.started)
	ttl := fsys.opts.entryTimeout()
	out.SetEntryTimeout(ttl)
	out.SetAttrTimeout(ttl)
	if ch := parent.GetChild(slotsName); ch != nil && ch.StableAttr().Ino == ino {
		return ch
	}
	return parent.NewInode(ctx, &slotsDir{fsys: fsys}, fs.StableAttr{Mode: syscall.S_IFDIR, Ino: ino})
}

func (d *slotsDir) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	fillSyntheticDir(&out.Attr, d.StableAttr().Ino, d.fsys.started)
	out.SetTimeout(d.fsys.opts.entryTimeout())
	return 0
}

func (d *slotsDir) OnForget() { d.fsys.inos.forget(d.StableAttr().Ino) }

// Readdir lists nothing: Slots are reached by name.
func (d *slotsDir) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	return fs.NewListDirStream(nil), 0
}

// Lookup finds a Slot. A name that is not one is not cached as missing:
// names are handed out before they are looked up, but a stray lookup
// must not hide a Slot made later.
func (d *slotsDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	d.fsys.mu.Lock()
	sd := d.fsys.slots[name]
	d.fsys.mu.Unlock()
	if sd == nil {
		out.SetEntryTimeout(time.Nanosecond)
		return nil, syscall.ENOENT
	}
	ino := d.fsys.inos.ino(syntheticIdentity('s', name))
	sd.mu.RLock()
	sd.fillAttr(&out.Attr, ino)
	sd.mu.RUnlock()
	out.SetEntryTimeout(d.fsys.opts.entryTimeout())
	out.SetAttrTimeout(time.Nanosecond) // the attributes change at Bind (0 would mean the mount's default)
	if ch := d.GetChild(name); ch != nil && ch.StableAttr().Ino == ino {
		return ch, 0
	}
	return d.NewInode(ctx, sd, fs.StableAttr{Mode: syscall.S_IFDIR, Ino: ino}), 0
}

// slotDir is a Slot's root: a treeDir whose view and entry Bind sets,
// under mu, once.
type slotDir struct {
	treeDir
	mu    sync.RWMutex
	bound bool
}

var (
	_ = (fs.NodeGetattrer)((*slotDir)(nil))
	_ = (fs.NodeLookuper)((*slotDir)(nil))
	_ = (fs.NodeOpendirHandler)((*slotDir)(nil))
)

// fillAttr describes the Slot's root: a synthetic directory until Bind,
// then its Commit's root. d.mu is held.
func (d *slotDir) fillAttr(out *fuse.Attr, ino uint64) {
	if d.bound {
		fillAttr(out, &d.e, ino)
	} else {
		fillSyntheticDir(out, ino, d.fsys.started)
	}
}

func (d *slotDir) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.mu.RLock()
	defer d.mu.RUnlock()
	d.fillAttr(&out.Attr, d.StableAttr().Ino)
	if d.bound {
		out.SetTimeout(d.fsys.opts.entryTimeout())
	} else {
		out.SetTimeout(time.Nanosecond) // not 0: go-fuse reads that as the mount's default
	}
	return 0
}

// errUnbound answers what a Slot cannot know before Bind. Not ENOENT,
// which the kernel would cache.
const errUnbound = syscall.EIO

func (d *slotDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if !d.bound {
		return nil, errUnbound
	}
	return d.treeDir.Lookup(ctx, name, out)
}

func (d *slotDir) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if !d.bound {
		return nil, 0, errUnbound
	}
	return d.treeDir.OpendirHandle(ctx, flags)
}
