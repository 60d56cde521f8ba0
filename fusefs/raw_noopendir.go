package fusefs

import (
	"github.com/hanwen/go-fuse/v2/fuse"
)

// noOpendir puts the kernel in no-opendir mode, as Open's ENOSYS does for
// files: OPENDIR answers ENOSYS, the kernel stops sending OPENDIR and
// RELEASEDIR and opens every directory with FOPEN_KEEP_CACHE and
// FOPEN_CACHE_DIR, so a directory listed once is listed from the kernel's
// cache ever after, with no request at all. That removes the last requests
// of a warm walk: one OPENDIR/RELEASEDIR pair per directory.
//
// go-fuse serves READDIR only on handles it opened, so for a read that
// comes without one this wrapper opens a handle through go-fuse (and so
// through the node's OpendirHandle), reads at the requested offset (go-fuse
// seeks the handle there) and releases it, all within the request: no
// handle outlives a request, so none can outlive its node.
type noOpendir struct {
	fuse.RawFileSystem
}

func (r *noOpendir) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	return fuse.ENOSYS
}

func (r *noOpendir) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return r.read(cancel, in, out, r.RawFileSystem.ReadDir)
}

func (r *noOpendir) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return r.read(cancel, in, out, r.RawFileSystem.ReadDirPlus)
}

type readDirFunc func(<-chan struct{}, *fuse.ReadIn, *fuse.DirEntryList) fuse.Status

func (r *noOpendir) read(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList, fn readDirFunc) fuse.Status {
	if in.Fh != 0 {
		return fn(cancel, in, out)
	}
	var opened fuse.OpenOut
	st := r.RawFileSystem.OpenDir(cancel, &fuse.OpenIn{InHeader: in.InHeader, Flags: in.Flags}, &opened)
	if st != fuse.OK {
		return st
	}
	defer r.RawFileSystem.ReleaseDir(&fuse.ReleaseIn{InHeader: fuse.InHeader{NodeId: in.NodeId}, Fh: opened.Fh})
	req := *in
	req.Fh = opened.Fh
	return fn(cancel, &req, out)
}
