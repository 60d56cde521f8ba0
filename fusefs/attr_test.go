package fusefs

import (
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/layerfs/layerfs/store"
)

func TestFillAttr(t *testing.T) {
	var a fuse.Attr
	fillAttr(&a, &store.Entry{Type: store.TypeFile, Mode: 04755, UID: 7, GID: 8, Size: 513, MTime: 1_500_000_000_000_000_123}, 42)
	if a.Ino != 42 || a.Mode != syscall.S_IFREG|04755 || a.Uid != 7 || a.Gid != 8 || a.Size != 513 || a.Blocks != 2 ||
		a.Mtime != 1_500_000_000 || a.Mtimensec != 123 || a.Ctime != a.Mtime || a.Nlink != 1 {
		t.Errorf("file: %+v", a)
	}
	fillAttr(&a, &store.Entry{Type: store.TypeDir, Mode: 0700}, 3)
	if a.Mode != syscall.S_IFDIR|0700 || a.Size != dirSize {
		t.Errorf("dir: %+v", a)
	}
}

func TestSplitTimeBeforeEpoch(t *testing.T) {
	sec, nsec := splitTime(-1_500_000_000) // 1.5 s before 1970
	if int64(sec) != -2 || nsec != 500_000_000 {
		t.Errorf("got %d s %d ns", int64(sec), nsec)
	}
}
