package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// readOnly answers EROFS to every operation that would change the tree.
// Every node embeds it. The mount is also MS_RDONLY, so the kernel refuses
// most writes before they get here; these answers are for the rest, and
// for a server mounted without the flag.
type readOnly struct{}

var (
	_ = (fs.NodeSetattrer)((*readOnly)(nil))
	_ = (fs.NodeMkdirer)((*readOnly)(nil))
	_ = (fs.NodeMknoder)((*readOnly)(nil))
	_ = (fs.NodeLinker)((*readOnly)(nil))
	_ = (fs.NodeSymlinker)((*readOnly)(nil))
	_ = (fs.NodeCreater)((*readOnly)(nil))
	_ = (fs.NodeTmpfiler)((*readOnly)(nil))
	_ = (fs.NodeUnlinker)((*readOnly)(nil))
	_ = (fs.NodeRmdirer)((*readOnly)(nil))
	_ = (fs.NodeRenamer)((*readOnly)(nil))
	_ = (fs.NodeSetxattrer)((*readOnly)(nil))
	_ = (fs.NodeRemovexattrer)((*readOnly)(nil))
	_ = (fs.NodeWriter)((*readOnly)(nil))
	_ = (fs.NodeAllocater)((*readOnly)(nil))
	_ = (fs.NodeCopyFileRanger)((*readOnly)(nil))
)

func (readOnly) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}

func (readOnly) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (readOnly) Mknod(ctx context.Context, name string, mode, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (readOnly) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (readOnly) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (readOnly) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EROFS
}

func (readOnly) Tmpfile(ctx context.Context, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EROFS
}

func (readOnly) Unlink(ctx context.Context, name string) syscall.Errno { return syscall.EROFS }

func (readOnly) Rmdir(ctx context.Context, name string) syscall.Errno { return syscall.EROFS }

func (readOnly) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return syscall.EROFS
}

func (readOnly) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	return syscall.EROFS
}

func (readOnly) Removexattr(ctx context.Context, attr string) syscall.Errno { return syscall.EROFS }

func (readOnly) Write(ctx context.Context, f fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	return 0, syscall.EROFS
}

func (readOnly) Allocate(ctx context.Context, f fs.FileHandle, off, size uint64, mode uint32) syscall.Errno {
	return syscall.EROFS
}

func (readOnly) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle,
	offOut, length, flags uint64) (uint32, syscall.Errno) {
	return 0, syscall.EROFS
}
