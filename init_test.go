package layerfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/publish"
	"github.com/layerfs/layerfs/store"
)

func newTestStore(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.layerfs")
	st, err := Open(path, Options{Create: true, Durability: store.Fast})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, path
}

func write(t *testing.T, path string, data []byte, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// sampleTree builds a directory with every kind of entry init captures.
func sampleTree(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "src")
	big := make([]byte, 3<<20)
	rand.New(rand.NewSource(1)).Read(big)
	write(t, filepath.Join(dir, "README.md"), []byte("# hello\n"), 0o644)
	write(t, filepath.Join(dir, "data.bin"), big[len(big)-4096:], 0o644) // bytes no chunk of bin/tool starts with
	write(t, filepath.Join(dir, "empty"), nil, 0o600)
	write(t, filepath.Join(dir, "bin/tool"), big, 0o755)
	write(t, filepath.Join(dir, "src/a/b/c.go"), []byte("package c\n"), 0o640)
	write(t, filepath.Join(dir, ".git/HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	write(t, filepath.Join(dir, "node_modules/x/index.js"), []byte("module.exports = 1\n"), 0o644)
	write(t, filepath.Join(dir, "dup1"), bytes.Repeat([]byte("same"), 100), 0o644)
	write(t, filepath.Join(dir, "dup2"), bytes.Repeat([]byte("same"), 100), 0o644)
	for _, d := range []string{"emptydir", "sticky"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(dir, "sticky"), 0o1777|os.ModeSticky)
	if err := os.Symlink("README.md", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../nowhere", filepath.Join(dir, "src/dangling")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(dir, "README.md"), filepath.Join(dir, "hardlink")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Date(2001, 2, 3, 4, 5, 6, 789, time.UTC)
	os.Chtimes(filepath.Join(dir, "src/a/b/c.go"), old, old)
	os.Chtimes(filepath.Join(dir, "src/a"), old, old)
	return dir
}

// describe lists every entry below dir with what a round trip must keep.
func describe(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		st := fi.Sys().(*syscall.Stat_t)
		desc := fi.Mode().String() + " " + fi.ModTime().UTC().Format(time.RFC3339Nano)
		desc += " " + string(rune('0'+st.Uid%10))
		switch {
		case fi.Mode().IsRegular():
			data, _ := os.ReadFile(p)
			desc += " " + string(data)
		case fi.Mode()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			desc += " -> " + target
		}
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestInitExportRoundTrip(t *testing.T) {
	st, _ := newTestStore(t)
	src := sampleTree(t)
	res, err := st.Init(src, InitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Skipped) != 1 || res.Skipped[0] != "fifo" {
		t.Errorf("skipped %v, want [fifo]", res.Skipped)
	}
	if res.Files != 10 || res.Symlinks != 2 {
		t.Errorf("captured %d files, %d symlinks; want 10, 2", res.Files, res.Symlinks)
	}
	out := filepath.Join(t.TempDir(), "out")
	if _, err := st.Export("main", out, ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	want, got := describe(t, src), describe(t, out)
	delete(want, "fifo")
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s:\n got %.120q\nwant %.120q", p, got[p], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("exported %d entries, want %d", len(got), len(want))
	}
	if rep, err := st.Backend().Fsck(); err != nil || !rep.OK() {
		t.Fatalf("fsck: %v %v", err, rep.Problems)
	}
}

func TestInitRefusesBadInput(t *testing.T) {
	st, _ := newTestStore(t)
	if _, err := st.Init(filepath.Join(t.TempDir(), "missing"), InitOptions{}); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("init of a missing dir: %v", err)
	}
	src := sampleTree(t)
	if _, err := st.Init(src, InitOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Init(src, InitOptions{}); !errors.Is(err, ErrInitialized) {
		t.Errorf("second init: %v, want ErrInitialized", err)
	}
	out := t.TempDir()
	write(t, filepath.Join(out, "x"), []byte("keep me"), 0o644)
	if _, err := st.Export("main", out, ExportOptions{}); !errors.Is(err, ErrNotEmpty) {
		t.Errorf("export into a non-empty dir: %v", err)
	}
	if data, _ := os.ReadFile(filepath.Join(out, "x")); string(data) != "keep me" {
		t.Error("export touched an existing file")
	}
	if _, err := st.Export("nope", t.TempDir(), ExportOptions{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("export of an unknown ref: %v", err)
	}
}

func TestExportSubtreeAndFork(t *testing.T) {
	st, _ := newTestStore(t)
	if _, err := st.Init(sampleTree(t), InitOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Backend().Fork("agent-1", "main"); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if _, err := st.Export("agent-1:src/a", out, ExportOptions{}); err == nil {
		t.Error("REF:PATH is the CLI's syntax; the SDK takes Path")
	}
	if _, err := st.Export("agent-1", out, ExportOptions{Path: "src/a"}); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(out, "b/c.go")); err != nil || string(data) != "package c\n" {
		t.Errorf("subtree export: %q %v", data, err)
	}
	// The directory exported takes the subtree's own mode and mtime.
	root, _, _ := st.Backend().CommitRoot("agent-1")
	e, err := st.Backend().Lookup(root, "src/a")
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(out)
	if err != nil || uint32(fi.Mode().Perm()) != e.Mode&0o777 || fi.ModTime().UnixNano() != e.MTime {
		t.Errorf("the subtree's root: %v %v, want mode %o mtime %d", fi.Mode(), fi.ModTime().UnixNano(), e.Mode, e.MTime)
	}
	// "." is the commit's root, which has no metadata stored: the target
	// keeps its own (not 1970's).
	whole := filepath.Join(t.TempDir(), "whole")
	if _, err := st.Export("agent-1", whole, ExportOptions{Path: "."}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(whole); err != nil || time.Since(fi.ModTime()) > time.Hour {
		t.Errorf("export of '.': the target's mtime is %v (%v)", fi.ModTime(), err)
	}
}

func TestCorruptChunkIsReported(t *testing.T) {
	st, path := newTestStore(t)
	src := sampleTree(t)
	if _, err := st.Init(src, InitOptions{}); err != nil {
		t.Fatal(err)
	}
	s := st.Backend()
	root, _, _ := s.CommitRoot("main")
	data, err := s.Lookup(root, "data.bin")
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	// data.bin is random, so stored raw, and its bytes are findable.
	store.CorruptObject(t, path, data.ID)
	st2, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	rep, err := st2.Backend().Fsck()
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() || len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0].From, "data.bin") {
		t.Fatalf("fsck after corruption: %+v", rep.Problems)
	}
	_, err = st2.Export("main", t.TempDir(), ExportOptions{})
	if !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("export of a corrupt file: %v, want ErrCorrupt", err)
	}
	if _, err := st2.Export("main", t.TempDir(), ExportOptions{Path: "src"}); err != nil {
		t.Errorf("other files must stay readable: %v", err)
	}
}

// TestExportSparse: blocks of zeros export as holes; the bytes are the
// same.
func TestExportSparse(t *testing.T) {
	st, _ := newTestStore(t)
	if _, err := st.Init(sampleTree(t), InitOptions{}); err != nil {
		t.Fatal(err)
	}
	f, err := st.FS("main")
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 8<<20)
	copy(data, "head")
	copy(data[5<<20+123:], "middle")
	data[len(data)-1] = 'z'
	if _, err := f.Write("sparse.bin", data); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if _, err := st.Export("main", out, ExportOptions{Path: "sparse.bin"}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(out, "sparse.bin")
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("exported bytes differ (%d of %d) %v", len(got), len(data), err)
	}
	var stat syscall.Stat_t
	if err := syscall.Stat(p, &stat); err != nil {
		t.Fatal(err)
	}
	if used := stat.Blocks * 512; used > 1<<20 {
		t.Errorf("an 8 MiB file of nearly all zeros takes %d bytes on disk", used)
	}
}

// TestInitKeepsAFarMTimeNearest: an mtime past what int64 nanoseconds hold
// (2400) is kept as the latest they can (2262), not wrapped around (1815).
func TestInitKeepsAFarMTimeNearest(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "future")
	write(t, p, []byte("x\n"), 0o644)
	const y2400 = 13569465600
	var st unix.Stat_t
	ts := []unix.Timespec{{Sec: y2400}, {Sec: y2400}}
	if err := unix.UtimesNano(p, ts); err != nil || unix.Stat(p, &st) != nil || st.Mtim.Sec != y2400 {
		t.Skipf("the filesystem keeps no mtime in 2400: %v", err)
	}
	s, _ := newTestStore(t)
	if _, err := s.Init(dir, InitOptions{}); err != nil {
		t.Fatal(err)
	}
	f, err := s.FS("main")
	if err != nil {
		t.Fatal(err)
	}
	fi, err := f.Stat("future")
	if err != nil {
		t.Fatal(err)
	}
	if fi.MTime.Year() != 2262 {
		t.Errorf("mtime %v, want the latest int64 nanoseconds hold, in 2262", fi.MTime)
	}
}

// TestExportLongPaths: the Store takes paths up to 4095 bytes; exported
// below a target directory they pass PATH_MAX, where the export reaches
// them a run of components at a time. It stopped at the first, with
// ENAMETOOLONG, leaving a partial tree.
func TestExportLongPaths(t *testing.T) {
	_, f := newProject(t)
	var parts []string
	for i := 0; i < 20; i++ {
		parts = append(parts, fmt.Sprintf("%03d%s", i, strings.Repeat("d", 199)))
	}
	dir := strings.Join(parts, "/") // 4059 bytes
	expect(t, publish.Committed)(f.Write(dir+"/f.txt", []byte("deep\n")))
	expect(t, publish.Committed)(f.Symlink(dir+"/link", "f.txt"))
	expect(t, publish.Committed)(f.Chmod(dir+"/f.txt", 0o640))
	dst := filepath.Join(t.TempDir(), "out")
	res, err := f.st.Export("main", dst, ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Symlinks < 2 { // the sample tree's link, and this one
		t.Errorf("exported %+v", res)
	}
	long := filepath.Join(dst, filepath.FromSlash(dir))
	if len(long+"/f.txt") < unix.PathMax {
		t.Fatalf("the path is only %d bytes", len(long))
	}
	d, err := openLongDir(long)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(d)
	fd, err := unix.Openat(d, "f.txt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	file := os.NewFile(uintptr(fd), "f.txt")
	defer file.Close()
	data, _ := io.ReadAll(file)
	fi, _ := file.Stat()
	if string(data) != "deep\n" || fi.Mode().Perm() != 0o640 {
		t.Errorf("f.txt: %q %v", data, fi.Mode())
	}
	buf := make([]byte, 64)
	if n, err := unix.Readlinkat(d, "link", buf); err != nil || string(buf[:n]) != "f.txt" {
		t.Errorf("link: %q %v", buf[:n], err)
	}
	// And back: init reads them the same way.
	st2, _ := newTestStore(t)
	if _, err := st2.Init(dst, InitOptions{}); err != nil {
		t.Fatal(err)
	}
	f2, err := st2.FS("main")
	if err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, f2, dir+"/f.txt"); got != "deep\n" {
		t.Errorf("init of the export: %q", got)
	}
	if fi, err := f2.Stat(dir + "/link"); err != nil || fi.Target != "f.txt" {
		t.Errorf("init of the export, the link: %+v %v", fi, err)
	}
}
