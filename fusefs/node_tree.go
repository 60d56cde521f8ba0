package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/layerfs/layerfs/lowerfs"
	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// treeDir is a directory of a Commit's tree.
type treeDir struct {
	fs.Inode
	readOnly
	fsys *fileSystem
	view *lowerfs.View
	e    store.Entry
	path string // below the Commit's root; "" for the root itself
	slot string // the Slot the tree is seen through, if any (its directories are its own)
}

var (
	_ = (fs.NodeGetattrer)((*treeDir)(nil))
	_ = (fs.NodeLookuper)((*treeDir)(nil))
	_ = (fs.NodeOpendirHandler)((*treeDir)(nil))
	_ = (fs.NodeStatfser)((*treeDir)(nil))
	_ = (fs.NodeOnForgetter)((*treeDir)(nil))
)

// newCommitDir returns the node of a Commit's root directory.
func newCommitDir(fsys *fileSystem, v *lowerfs.View) *treeDir {
	return &treeDir{fsys: fsys, view: v, e: v.Root()}
}

func (d *treeDir) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	fillAttr(&out.Attr, &d.e, d.StableAttr().Ino)
	out.SetTimeout(d.fsys.opts.entryTimeout())
	return 0
}

func (d *treeDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	e, err := d.view.Lookup(d.e, name)
	if err != nil {
		return nil, d.fsys.errno(err, d.EmbeddedInode(), name)
	}
	return d.child(ctx, &e, out), 0
}

func (d *treeDir) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	return statfs(out)
}

// OnForget drops the node's number and, for a Commit's root directory in
// an all-commits mount, the Commit's View: a long-lived mount (the
// daemon's) would otherwise keep one for every Commit ever looked up.
func (d *treeDir) OnForget() {
	d.fsys.inos.forget(d.StableAttr().Ino)
	if d.path == "" && d.slot == "" {
		d.fsys.dropView(d.view)
	}
}

// child returns the node of entry e of this directory and describes it in
// out, reusing the node the kernel already knows when there is one.
func (d *treeDir) child(ctx context.Context, e *store.Entry, out *fuse.EntryOut) *fs.Inode {
	path := joinPath(d.path, e.Name)
	ino := d.fsys.inos.ino(d.identity(path, e))
	fillAttr(&out.Attr, e, ino)
	ttl := d.fsys.opts.entryTimeout()
	out.SetEntryTimeout(ttl)
	out.SetAttrTimeout(ttl)
	if ch := d.GetChild(e.Name); ch != nil && ch.StableAttr().Ino == ino {
		return ch
	}
	return d.NewInode(ctx, d.newNode(e, path), fs.StableAttr{Mode: typeBits(e.Type), Ino: ino})
}

// identity is what the inode number of the child at path is derived from.
func (d *treeDir) identity(path string, e *store.Entry) identity {
	if e.Type == store.TypeDir {
		if d.slot != "" {
			return syntheticIdentity('D', d.slot, d.rootID().String(), path)
		}
		return dirIdentity(d.rootID(), path)
	}
	return fileIdentity(path, e)
}

// rootID names the tree this directory belongs to: its Commit, or the root
// tree of a View that has none.
func (d *treeDir) rootID() object.ID {
	if c := d.view.Commit(); !c.IsZero() {
		return c
	}
	return d.view.Root().ID
}

func (d *treeDir) newNode(e *store.Entry, path string) fs.InodeEmbedder {
	switch e.Type {
	case store.TypeDir:
		return &treeDir{fsys: d.fsys, view: d.view, e: *e, path: path, slot: d.slot}
	case store.TypeSymlink:
		return &linkNode{fsys: d.fsys, e: *e, ttl: d.fsys.opts.entryTimeout()}
	}
	return &fileNode{fsys: d.fsys, view: d.view, e: *e}
}

func joinPath(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// statfs describes the filesystem: read-only, with no free space.
func statfs(out *fuse.StatfsOut) syscall.Errno {
	*out = fuse.StatfsOut{Bsize: 4096, Frsize: 4096, NameLen: 255}
	return 0
}
