package integration

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// posixTree is the tree the posix tables read, with what they expect.
var posixTree = struct {
	files map[string]string
	big   []byte
	mtime time.Time
}{
	files: map[string]string{
		"README":          "read me\n",
		"bin/tool":        "#!/bin/sh\necho tool\n",
		"src/a/b/c.go":    "package b\n",
		"src/link":        "->../README",
		"src/dangling":    "->nowhere",
		"empty/":          "",
		"src/a/empty.txt": "",
	},
	big:   randomBytes(11, 2<<20+77),
	mtime: time.Date(2024, 2, 29, 12, 30, 15, 123456789, time.UTC),
}

// posixStore captures posixTree, with modes and times set, into a Store.
func posixStore(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	writeTree(t, src, posixTree.files)
	if err := os.WriteFile(filepath.Join(src, "big.bin"), posixTree.big, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(src, "bin/tool"), 0o755)
	os.Chmod(filepath.Join(src, "README"), 0o640)
	os.Chtimes(filepath.Join(src, "README"), posixTree.mtime, posixTree.mtime)
	return initStore(t, src)
}

// readChecks hold for any view of posixTree: the mount, a Commit inside an
// all-commits mount, and an overlay over either.
var readChecks = map[string]func(t *testing.T, dir string){
	"stat": func(t *testing.T, dir string) {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(dir, "README"), &st); err != nil {
			t.Fatal(err)
		}
		if st.Mode != unix.S_IFREG|0o640 || st.Size != 8 || st.Mtim.Nano() != posixTree.mtime.UnixNano() {
			t.Errorf("README: mode %o size %d mtime %d", st.Mode, st.Size, st.Mtim.Nano())
		}
		if err := unix.Lstat(filepath.Join(dir, "bin/tool"), &st); err != nil || st.Mode&0o777 != 0o755 {
			t.Errorf("bin/tool: mode %o, %v", st.Mode, err)
		}
	},
	"readdir types": func(t *testing.T, dir string) {
		ents, err := os.ReadDir(filepath.Join(dir, "src"))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range ents {
			got = append(got, e.Name()+":"+e.Type().String())
		}
		if want := "a:d---------,dangling:L---------,link:L---------"; strings.Join(got, ",") != want {
			t.Errorf("src lists %s, want %s", strings.Join(got, ","), want)
		}
	},
	"readlink": func(t *testing.T, dir string) {
		if got, err := os.Readlink(filepath.Join(dir, "src/link")); err != nil || got != "../README" {
			t.Errorf("src/link -> %q, %v", got, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "src/dangling")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("following a dangling link: %v", err)
		}
	},
	"missing": func(t *testing.T, dir string) {
		for i := 0; i < 2; i++ { // the second answer may come from a negative entry
			if _, err := os.Lstat(filepath.Join(dir, "src/nope")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("src/nope: %v", err)
			}
		}
	},
	"read whole": func(t *testing.T, dir string) {
		got, err := os.ReadFile(filepath.Join(dir, "big.bin"))
		if err != nil || !bytes.Equal(got, posixTree.big) {
			t.Errorf("big.bin: %d bytes, %v", len(got), err)
		}
		if got, err := os.ReadFile(filepath.Join(dir, "src/a/empty.txt")); err != nil || len(got) != 0 {
			t.Errorf("empty file: %q, %v", got, err)
		}
	},
	"pread and seek": func(t *testing.T, dir string) {
		f, err := os.Open(filepath.Join(dir, "big.bin"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		buf := make([]byte, 100_000)
		for _, off := range []int64{0, 1, 65535, 1 << 20, int64(len(posixTree.big)) - 10} {
			n, err := f.ReadAt(buf, off)
			if err != nil && err != io.EOF || !bytes.Equal(buf[:n], posixTree.big[off:off+int64(n)]) {
				t.Errorf("pread at %d: %d bytes, %v", off, n, err)
			}
		}
		if end, err := f.Seek(0, io.SeekEnd); err != nil || end != int64(len(posixTree.big)) {
			t.Errorf("seek to the end: %d, %v", end, err)
		}
	},
	"mmap": func(t *testing.T, dir string) {
		f, err := os.Open(filepath.Join(dir, "big.bin"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		m, err := unix.Mmap(int(f.Fd()), 0, len(posixTree.big), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(m)
		if !bytes.Equal(m, posixTree.big) {
			t.Error("mapped bytes differ")
		}
	},
	"inode numbers are stable": func(t *testing.T, dir string) {
		var a, b unix.Stat_t
		unix.Lstat(filepath.Join(dir, "src/a/b/c.go"), &a)
		os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0) // forget dentries and inodes
		unix.Lstat(filepath.Join(dir, "src/a/b/c.go"), &b)
		if a.Ino == 0 || a.Ino != b.Ino {
			t.Errorf("inode %d became %d", a.Ino, b.Ino)
		}
	},
}

// writeChecks are refused with EROFS by the read-only views.
var writeChecks = map[string]func(dir string) error{
	"create":   func(d string) error { return os.WriteFile(filepath.Join(d, "new"), nil, 0o644) },
	"write":    func(d string) error { return closeErr(os.OpenFile(filepath.Join(d, "README"), os.O_WRONLY, 0)) },
	"truncate": func(d string) error { return os.Truncate(filepath.Join(d, "README"), 0) },
	"mkdir":    func(d string) error { return os.Mkdir(filepath.Join(d, "newdir"), 0o755) },
	"unlink":   func(d string) error { return os.Remove(filepath.Join(d, "README")) },
	"rmdir":    func(d string) error { return os.Remove(filepath.Join(d, "empty")) },
	"rename":   func(d string) error { return os.Rename(filepath.Join(d, "README"), filepath.Join(d, "R")) },
	"chmod":    func(d string) error { return os.Chmod(filepath.Join(d, "README"), 0o600) },
	"chown":    func(d string) error { return os.Lchown(filepath.Join(d, "README"), 1, 1) },
	"utimes":   func(d string) error { return os.Chtimes(filepath.Join(d, "README"), time.Now(), time.Now()) },
	"symlink":  func(d string) error { return os.Symlink("x", filepath.Join(d, "newlink")) },
	"link":     func(d string) error { return os.Link(filepath.Join(d, "README"), filepath.Join(d, "hard")) },
	"setxattr": func(d string) error { return unix.Setxattr(filepath.Join(d, "README"), "user.x", []byte("1"), 0) },
	"mknod":    func(d string) error { return unix.Mkfifo(filepath.Join(d, "fifo"), 0o644) },
}

func closeErr(f *os.File, err error) error {
	if f != nil {
		f.Close()
	}
	return err
}

func TestMountPosix(t *testing.T) {
	s := posixStore(t)
	single := mountStore(t, s, "main")
	all := mountStore(t, s, "--all-commits")
	commit, err := os.Readlink(filepath.Join(all, "branches", "main"))
	if err != nil {
		t.Fatal(err)
	}
	views := map[string]string{
		"single-ref mount":   single,
		"all-commits Commit": filepath.Join(all, "branches", commit),
		"overlay":            mountOverlay(t, single),
	}
	for view, dir := range views {
		for name, check := range readChecks {
			t.Run(view+"/"+name, func(t *testing.T) { check(t, dir) })
		}
		if view == "overlay" {
			continue
		}
		for name, write := range writeChecks {
			if err := write(dir); !errors.Is(err, syscall.EROFS) {
				t.Errorf("%s/%s: %v, want EROFS", view, name, err)
			}
		}
	}
	if err := writeChecks["create"](views["overlay"]); err != nil {
		t.Errorf("create in the overlay: %v", err)
	}
}
