package fusefs

import (
	"context"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// branchesName is the all-commits root's directory of branch links.
const branchesName = "branches"

// rootRef matches the names the all-commits root resolves: a commit or
// layer id or prefix, or a layer name.
var rootRef = regexp.MustCompile(`^([0-9a-fA-F]{4,64}|L[0-9]+)$`)

// commitsRoot is the root of an all-commits mount (see the package doc).
type commitsRoot struct {
	fs.Inode
	readOnly
	fsys *fileSystem
}

var (
	_ = (fs.NodeGetattrer)((*commitsRoot)(nil))
	_ = (fs.NodeLookuper)((*commitsRoot)(nil))
	_ = (fs.NodeReaddirer)((*commitsRoot)(nil))
	_ = (fs.NodeStatfser)((*commitsRoot)(nil))
)

func (r *commitsRoot) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	fillSyntheticDir(&out.Attr, 1, r.fsys.started)
	out.SetTimeout(r.fsys.opts.branchTimeout())
	return 0
}

func (r *commitsRoot) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	return statfs(out)
}

// Readdir lists branches/ only: Commits are reached by name.
func (r *commitsRoot) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	ino := r.fsys.inos.peek(syntheticIdentity('B', ""))
	return fs.NewListDirStream([]fuse.DirEntry{{Name: branchesName, Mode: syscall.S_IFDIR, Ino: ino}}), 0
}

// Lookup resolves a child of the root. Failed lookups are not cached:
// a Commit that does not exist yet may be made a moment later.
func (r *commitsRoot) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if name == branchesName {
		return newBranchesDir(ctx, r.fsys, r.EmbeddedInode(), "", out), 0
	}
	if name == slotsName {
		return newSlotsDir(ctx, r.fsys, r.EmbeddedInode(), out), 0
	}
	out.SetEntryTimeout(time.Nanosecond)
	if !rootRef.MatchString(name) {
		return nil, syscall.ENOENT
	}
	// A full id names a Commit before anything else (a branch may have
	// such a name too, but branches are under branches/ only). One this
	// process knows, such as one it just landed, is in the Store's commit
	// cache: no query.
	if id, err := object.Parse(name); err == nil && id.String() == name {
		if _, err := r.fsys.st.Commit(id); err == nil {
			return r.commitDir(ctx, store.Resolved{Commit: id, Kind: store.RefCommit}, out)
		}
	}
	res, err := r.fsys.st.Resolve(name)
	if err == nil && res.Kind == store.RefBranch {
		return nil, syscall.ENOENT // branches are under branches/ only
	}
	if err != nil {
		return nil, r.fsys.errno(err, r.EmbeddedInode(), name)
	}
	if hex := res.Commit.String(); hex != name {
		return r.link(ctx, name, hex, out), 0
	}
	return r.commitDir(ctx, res, out)
}

// commitDir returns the directory of a Commit named by its full id.
func (r *commitsRoot) commitDir(ctx context.Context, res store.Resolved, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	v, err := r.fsys.view(res.Commit)
	if err != nil {
		return nil, r.fsys.errno(err, r.EmbeddedInode(), res.Commit.String())
	}
	d := newCommitDir(r.fsys, v)
	ino := r.fsys.inos.ino(dirIdentity(res.Commit, ""))
	fillAttr(&out.Attr, &d.e, ino)
	ttl := r.fsys.opts.entryTimeout()
	out.SetEntryTimeout(ttl)
	out.SetAttrTimeout(ttl)
	if ch := r.GetChild(res.Commit.String()); ch != nil && ch.StableAttr().Ino == ino {
		return ch, 0
	}
	return r.NewInode(ctx, d, fs.StableAttr{Mode: syscall.S_IFDIR, Ino: ino}), 0
}

// link returns a symlink named name to target, kept for BranchTimeout.
func (r *commitsRoot) link(ctx context.Context, name, target string, out *fuse.EntryOut) *fs.Inode {
	return newLink(ctx, r.fsys, r.EmbeddedInode(), name, target, out)
}

// newLink makes a ref's symlink below parent.
func newLink(ctx context.Context, fsys *fileSystem, parent *fs.Inode, name, target string, out *fuse.EntryOut) *fs.Inode {
	e := store.Entry{Name: name, Type: store.TypeSymlink, Mode: 0777, Size: int64(len(target)),
		Target: target, MTime: fsys.started.UnixNano()}
	ino := fsys.inos.ino(syntheticIdentity('l', parent.Path(nil), name, target))
	fillAttr(&out.Attr, &e, ino)
	ttl := fsys.opts.branchTimeout()
	out.SetEntryTimeout(ttl)
	out.SetAttrTimeout(ttl)
	if ch := parent.GetChild(name); ch != nil && ch.StableAttr().Ino == ino {
		return ch
	}
	return parent.NewInode(ctx, &linkNode{fsys: fsys, e: e, ttl: ttl}, fs.StableAttr{Mode: syscall.S_IFLNK, Ino: ino})
}

// fillSyntheticDir describes a directory that is in no tree: read-only for
// everyone, owned by root, modified at mtime.
func fillSyntheticDir(out *fuse.Attr, ino uint64, mtime time.Time) {
	e := store.Entry{Type: store.TypeDir, Mode: 0555, MTime: mtime.UnixNano()}
	fillAttr(out, &e, ino)
}

// relativeTo is the path from a directory depth levels below the root
// back up to the root, then to name.
func relativeTo(depth int, name string) string {
	return strings.Repeat("../", depth) + name
}
