package fusefs

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/layerfs/layerfs/internal/ovl"
	"github.com/layerfs/layerfs/lowerfs"
	"github.com/layerfs/layerfs/store"
)

// fileNode is a regular file. It has no open files: Open answers ENOSYS,
// the kernel stops sending OPEN, FLUSH and RELEASE, and reads carry no
// handle. Read-ahead state therefore lives in the node, shared by all its
// readers.
type fileNode struct {
	fs.Inode
	readOnly
	fsys *fileSystem
	view *lowerfs.View
	e    store.Entry

	once sync.Once
	f    *lowerfs.File
	ferr error
}

var (
	_ = (fs.NodeGetattrer)((*fileNode)(nil))
	_ = (fs.NodeOpener)((*fileNode)(nil))
	_ = (fs.NodeReader)((*fileNode)(nil))
	_ = (fs.NodeFlusher)((*fileNode)(nil))
	_ = (fs.NodeOnForgetter)((*fileNode)(nil))
	_ = (fs.NodeGetxattrer)((*fileNode)(nil))
)

// Getxattr answers overlayfs's metacopy questions for a file whose content
// has a data file (Options.DataRedirect): the file is then a metacopy, and
// its redirect is the data file's path in the data-only layer. An overlay
// stacked on the mount with that layer below it reads and copies up the
// data file, not the mount. Every other attribute is absent.
func (n *fileNode) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	redirect := n.fsys.opts.DataRedirect
	if redirect == nil || (attr != ovl.Metacopy && attr != ovl.Redirect) {
		return 0, syscall.ENODATA
	}
	to := redirect(n.e.ID, n.e.Size)
	if to == "" {
		return 0, syscall.ENODATA
	}
	val := ""
	if attr == ovl.Redirect {
		val = to
	}
	if len(dest) < len(val) {
		return uint32(len(val)), syscall.ERANGE
	}
	return uint32(copy(dest, val)), 0
}

func (n *fileNode) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	fillAttr(&out.Attr, &n.e, n.StableAttr().Ino)
	out.SetTimeout(n.fsys.opts.entryTimeout())
	return 0
}

// Open answers ENOSYS: the kernel then serves every later open of any file
// of this mount itself (no-open mode) and keeps page caches across opens.
func (n *fileNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return nil, 0, syscall.ENOSYS
}

// Flush answers ENOSYS, so the kernel stops sending FLUSH on close.
func (n *fileNode) Flush(ctx context.Context, f fs.FileHandle) syscall.Errno {
	return syscall.ENOSYS
}

// Read answers with the cached chunks themselves, which go-fuse writes to
// the kernel with one writev: no copy into dest. The chunks stay held
// until go-fuse is done with the reply.
func (n *fileNode) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	file, err := n.file()
	var slices [][]byte
	var release func()
	if err == nil {
		slices, release, err = file.Slices(off, int64(len(dest)))
	}
	if err != nil {
		return nil, n.fsys.errno(err, n.EmbeddedInode(), "")
	}
	return &chunksResult{slices: slices, release: release}, 0
}

// chunksResult is a read's reply: slices of chunks that lowerfs recycles
// once released, which Done does after go-fuse has written them. It offers
// Slices, so go-fuse writes them with writev rather than copying them.
type chunksResult struct {
	slices  [][]byte
	release func()
	done    atomic.Bool
}

var _ fuse.ReadResult = (*chunksResult)(nil)

func (r *chunksResult) Size() int {
	n := 0
	for _, s := range r.slices {
		n += len(s)
	}
	return n
}

// Slices is what go-fuse's writev path asks for.
func (r *chunksResult) Slices() ([][]byte, fuse.Status) { return r.slices, fuse.OK }

func (r *chunksResult) Bytes(buf []byte) ([]byte, fuse.Status) {
	buf = buf[:0]
	for _, s := range r.slices {
		buf = append(buf, s...)
	}
	return buf, fuse.OK
}

// Done releases the chunks, once however often it is called: releasing
// them twice would recycle buffers other reads still use.
func (r *chunksResult) Done() {
	if r.done.CompareAndSwap(false, true) {
		r.release()
	}
}

func (n *fileNode) OnForget() { n.fsys.inos.forget(n.StableAttr().Ino) }

func (n *fileNode) file() (*lowerfs.File, error) {
	n.once.Do(func() { n.f, n.ferr = n.view.OpenFile(n.e) })
	return n.f, n.ferr
}
