package fusefs

import (
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/layerfs/layerfs/store"
)

// dirSize is the size directories report, as most local filesystems do for
// a small directory; trees store none.
const dirSize = 4096

// typeBits is the S_IFMT part of an entry's mode.
func typeBits(t store.EntryType) uint32 {
	switch t {
	case store.TypeDir:
		return syscall.S_IFDIR
	case store.TypeSymlink:
		return syscall.S_IFLNK
	}
	return syscall.S_IFREG
}

// fillAttr sets out from a tree entry: type and permission bits, owner,
// size, and the stored mtime as atime, mtime and ctime alike.
func fillAttr(out *fuse.Attr, e *store.Entry, ino uint64) {
	size := e.Size
	if e.Type == store.TypeDir {
		size = dirSize
	}
	sec, nsec := splitTime(e.MTime)
	*out = fuse.Attr{
		Ino:   ino,
		Size:  uint64(size),
		Mode:  typeBits(e.Type) | e.Mode&07777,
		Nlink: 1,
		Owner: fuse.Owner{Uid: e.UID, Gid: e.GID},
		Atime: sec, Mtime: sec, Ctime: sec,
		Atimensec: nsec, Mtimensec: nsec, Ctimensec: nsec,
		Blksize: 4096,
		Blocks:  (uint64(size) + 511) / 512,
	}
}

// splitTime splits ns since the epoch into seconds (two's complement for
// times before 1970, as the kernel reads them) and nanoseconds in [0, 1e9).
func splitTime(ns int64) (uint64, uint32) {
	sec, nsec := ns/1e9, ns%1e9
	if nsec < 0 {
		sec, nsec = sec-1, nsec+1e9
	}
	return uint64(sec), uint32(nsec)
}
