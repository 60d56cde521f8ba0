package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/layerfs/layerfs/store"
)

// OpendirHandle lists the directory once and asks the kernel to cache the
// listing (FOPEN_CACHE_DIR) and keep it across opens: trees never change.
func (d *treeDir) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	ents, err := d.view.ReadDir(d.e)
	if err != nil {
		return nil, 0, d.fsys.errno(err, d.EmbeddedInode(), "")
	}
	return &dirHandle{d: d, ents: ents}, fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE, 0
}

// dirHandle streams a tree's entries after "." and "..". Offsets are
// positions in that stream, so seeking is exact.
type dirHandle struct {
	d    *treeDir
	ents []store.Entry
	pos  int // the next position: 0 is ".", 1 "..", 2 the first entry
}

var (
	_ = (fs.FileReaddirenter)((*dirHandle)(nil))
	_ = (fs.FileLookuper)((*dirHandle)(nil))
	_ = (fs.FileSeekdirer)((*dirHandle)(nil))
	_ = (fs.FileReleasedirer)((*dirHandle)(nil))
)

func (h *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	var de fuse.DirEntry
	switch i := h.pos - 2; {
	case i == -2:
		de = fuse.DirEntry{Name: ".", Mode: syscall.S_IFDIR, Ino: h.d.StableAttr().Ino}
	case i == -1:
		de = fuse.DirEntry{Name: "..", Mode: syscall.S_IFDIR, Ino: parentIno(h.d.EmbeddedInode())}
	case i < len(h.ents):
		e := &h.ents[i]
		ino := h.d.fsys.inos.peek(h.d.identity(joinPath(h.d.path, e.Name), e))
		de = fuse.DirEntry{Name: e.Name, Mode: typeBits(e.Type), Ino: ino}
	default:
		return nil, 0
	}
	h.pos++
	de.Off = uint64(h.pos)
	return &de, 0
}

// Lookup serves READDIRPLUS: name is the entry Readdirent gave last.
func (h *dirHandle) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if i := h.pos - 3; i >= 0 && i < len(h.ents) && h.ents[i].Name == name {
		return h.d.child(ctx, &h.ents[i], out), 0
	}
	return h.d.Lookup(ctx, name, out)
}

func (h *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if off > uint64(len(h.ents)+2) {
		return syscall.EINVAL
	}
	h.pos = int(off)
	return 0
}

func (h *dirHandle) Releasedir(ctx context.Context, releaseFlags uint32) {}

// parentIno is the inode number of n's parent, or n's own at the root.
func parentIno(n *fs.Inode) uint64 {
	if _, p := n.Parent(); p != nil {
		return p.StableAttr().Ino
	}
	return n.StableAttr().Ino
}
