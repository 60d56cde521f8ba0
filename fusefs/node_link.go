package fusefs

import (
	"context"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/layerfs/layerfs/store"
)

// linkNode is a symbolic link: one from a tree, or one the all-commits
// root makes for a ref (a branch, a layer, a commit prefix). Its target
// never changes; a ref that moves gets a new node.
type linkNode struct {
	fs.Inode
	readOnly
	fsys *fileSystem
	e    store.Entry
	ttl  time.Duration
}

var (
	_ = (fs.NodeGetattrer)((*linkNode)(nil))
	_ = (fs.NodeReadlinker)((*linkNode)(nil))
	_ = (fs.NodeOnForgetter)((*linkNode)(nil))
)

func (n *linkNode) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	fillAttr(&out.Attr, &n.e, n.StableAttr().Ino)
	out.SetTimeout(n.ttl)
	return 0
}

func (n *linkNode) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	return []byte(n.e.Target), 0
}

func (n *linkNode) OnForget() { n.fsys.inos.forget(n.StableAttr().Ino) }
