package fusefs

import (
	"context"
	"errors"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/layerfs/layerfs/store"
)

// branchesDir is branches/ in an all-commits mount, or a directory below
// it for branch names with slashes (branches/feature/ holds feature/x).
// Each branch is a symlink to ../<head-commit-id>, resolved at lookup.
type branchesDir struct {
	fs.Inode
	readOnly
	fsys   *fileSystem
	prefix string // "" for branches/, "feature/" for branches/feature/
}

var (
	_ = (fs.NodeGetattrer)((*branchesDir)(nil))
	_ = (fs.NodeLookuper)((*branchesDir)(nil))
	_ = (fs.NodeReaddirer)((*branchesDir)(nil))
	_ = (fs.NodeOnForgetter)((*branchesDir)(nil))
)

// newBranchesDir returns the node for prefix below parent.
func newBranchesDir(ctx context.Context, fsys *fileSystem, parent *fs.Inode, prefix string, out *fuse.EntryOut) *fs.Inode {
	ino := fsys.inos.ino(syntheticIdentity('B', prefix))
	fillSyntheticDir(&out.Attr, ino, time.Now())
	ttl := fsys.opts.branchTimeout()
	out.SetEntryTimeout(ttl)
	out.SetAttrTimeout(ttl)
	name := branchesName
	if prefix != "" {
		name = prefix[strings.LastIndexByte(prefix[:len(prefix)-1], '/')+1 : len(prefix)-1]
	}
	if ch := parent.GetChild(name); ch != nil && ch.StableAttr().Ino == ino {
		return ch
	}
	return parent.NewInode(ctx, &branchesDir{fsys: fsys, prefix: prefix}, fs.StableAttr{Mode: syscall.S_IFDIR, Ino: ino})
}

// Getattr reports the time of the call as the mtime: the kernel keeps a
// directory's listing until it sees the mtime change, and branches come
// and go, so a listing lasts BranchTimeout, as links do.
func (d *branchesDir) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	fillSyntheticDir(&out.Attr, d.StableAttr().Ino, time.Now())
	out.SetTimeout(d.fsys.opts.branchTimeout())
	return 0
}

func (d *branchesDir) OnForget() { d.fsys.inos.forget(d.StableAttr().Ino) }

// depth is how many directories below the mount root this one is.
func (d *branchesDir) depth() int { return 1 + strings.Count(d.prefix, "/") }

func (d *branchesDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	full := d.prefix + name
	b, err := d.fsys.st.Branch(full)
	if err == nil {
		return newLink(ctx, d.fsys, d.EmbeddedInode(), name, relativeTo(d.depth(), b.Head.String()), out), 0
	}
	if !errors.Is(err, store.ErrNotFound) {
		return nil, d.fsys.errno(err, d.EmbeddedInode(), name)
	}
	names, err := d.list()
	if err != nil {
		return nil, d.fsys.errno(err, d.EmbeddedInode(), name)
	}
	if names[name].mode == syscall.S_IFDIR {
		return newBranchesDir(ctx, d.fsys, d.EmbeddedInode(), full+"/", out), 0
	}
	out.SetEntryTimeout(d.fsys.opts.branchTimeout())
	return nil, syscall.ENOENT
}

func (d *branchesDir) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	names, err := d.list()
	if err != nil {
		return nil, d.fsys.errno(err, d.EmbeddedInode(), "")
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	ents := make([]fuse.DirEntry, len(sorted))
	for i, n := range sorted {
		ents[i] = fuse.DirEntry{Name: n, Mode: names[n].mode, Ino: d.fsys.inos.peek(d.identity(n, names[n]))}
	}
	return fs.NewListDirStream(ents), 0
}

// listed is a name in a branches directory: a branch's link, or a
// directory of longer branch names.
type listed struct {
	mode   uint32 // S_IFLNK or S_IFDIR
	target string // a link's target
}

// identity is what the listed name's node number derives from, as
// newLink and newBranchesDir make it.
func (d *branchesDir) identity(name string, l listed) identity {
	if l.mode == syscall.S_IFDIR {
		return syntheticIdentity('B', d.prefix+name+"/")
	}
	return syntheticIdentity('l', d.Path(nil), name, l.target)
}

// list returns the names directly in this directory. A name that is both
// a branch and a prefix of longer names is shown as the branch; its longer
// names stay out of reach here.
func (d *branchesDir) list() (map[string]listed, error) {
	bs, err := d.fsys.st.Branches()
	if err != nil {
		return nil, err
	}
	names := map[string]listed{}
	for _, b := range bs {
		rest, ok := strings.CutPrefix(b.Name, d.prefix)
		if !ok {
			continue
		}
		if first, _, nested := strings.Cut(rest, "/"); nested {
			if _, ok := names[first]; !ok {
				names[first] = listed{mode: syscall.S_IFDIR}
			}
		} else {
			names[rest] = listed{mode: syscall.S_IFLNK, target: relativeTo(d.depth(), b.Head.String())}
		}
	}
	return names, nil
}
