package fusefs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/layerfs/layerfs/lowerfs"
	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// These tests mount in this process, so that the race detector sees the
// server's goroutines under real kernel traffic. They need root and
// /dev/fuse and skip without them; the end-to-end bars are in integration/.

func needFUSE(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("needs /dev/fuse")
	}
}

// mountTest mounts cfg at a temporary directory until the test ends, and
// returns the mountpoint and what the server logged.
func mountTest(t *testing.T, cfg Config) (string, *syncBuffer) {
	t.Helper()
	srv, logged := mountServer(t, cfg)
	return srv.Mountpoint(), logged
}

// mountServer is mountTest returning the server.
func mountServer(t *testing.T, cfg Config) (*Server, *syncBuffer) {
	t.Helper()
	needFUSE(t)
	logged := &syncBuffer{}
	cfg.Mountpoint = t.TempDir()
	cfg.Source = "test"
	cfg.Logger = log.New(logged, "", 0)
	srv, err := Mount(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	return srv, logged
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func sample(big []byte) map[string]lowerfs.TestEntry {
	return map[string]lowerfs.TestEntry{
		"README":        {Data: "hello\n", Mode: 0640, UID: 1000, GID: 100},
		"big.bin":       {Data: string(big)},
		"src/a/b/c.go":  {Data: "package c\n"},
		"src/link":      {Target: "../README"},
		"empty":         {Dir: true, Mode: 0700},
		"bin/tool":      {Data: "#!/bin/sh\n", Mode: 04755},
		"src/a/zero.go": {},
	}
}

func TestMountServesTheTree(t *testing.T) {
	s := store.NewTestStore(t)
	big := make([]byte, 3<<20)
	rand.New(rand.NewSource(1)).Read(big)
	c := lowerfs.WriteTestCommit(t, s, sample(big))
	mnt, _ := mountTest(t, Config{Store: s, Commit: c})

	var st syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(mnt, "bin/tool"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode != syscall.S_IFREG|04755 || st.Size != 10 || st.Mtim.Nano() != lowerfs.TestMTime {
		t.Errorf("bin/tool: mode %o size %d mtime %d", st.Mode, st.Size, st.Mtim.Nano())
	}
	if err := syscall.Lstat(filepath.Join(mnt, "README"), &st); err != nil || st.Uid != 1000 || st.Gid != 100 || st.Mode&07777 != 0640 {
		t.Errorf("README: %+v %v", st, err)
	}
	if target, err := os.Readlink(filepath.Join(mnt, "src/link")); err != nil || target != "../README" {
		t.Errorf("readlink: %q %v", target, err)
	}
	if data, err := os.ReadFile(filepath.Join(mnt, "src/link")); err != nil || string(data) != "hello\n" {
		t.Errorf("through the link: %q %v", data, err)
	}
	names := readDirNames(t, filepath.Join(mnt, "src"))
	if strings.Join(names, ",") != "a,link" {
		t.Errorf("readdir src: %v", names)
	}
	if _, err := os.Stat(filepath.Join(mnt, "nope")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing name: %v", err)
	}
	readConcurrently(t, filepath.Join(mnt, "big.bin"), big)
}

func readDirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// readConcurrently reads path whole, and at random offsets, from several
// goroutines, and compares with want.
func readConcurrently(t *testing.T, path string, want []byte) {
	t.Helper()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			f, err := os.Open(path)
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			if seed == 0 {
				if got, err := io.ReadAll(f); err != nil || !bytes.Equal(got, want) {
					t.Errorf("whole read: %d bytes, %v", len(got), err)
				}
				return
			}
			rnd := rand.New(rand.NewSource(seed))
			for i := 0; i < 40; i++ {
				off := rnd.Int63n(int64(len(want)))
				buf := make([]byte, rnd.Intn(200<<10)+1)
				n, err := f.ReadAt(buf, off)
				if err != nil && err != io.EOF || !bytes.Equal(buf[:n], want[off:off+int64(n)]) {
					t.Errorf("read at %d: %d bytes, %v", off, n, err)
					return
				}
			}
		}(int64(g))
	}
	wg.Wait()
}

func TestMountIsReadOnly(t *testing.T) {
	s := store.NewTestStore(t)
	c := lowerfs.WriteTestCommit(t, s, sample(nil))
	mnt, _ := mountTest(t, Config{Store: s, Commit: c})
	p := func(name string) string { return filepath.Join(mnt, name) }
	for what, err := range map[string]error{
		"create":   os.WriteFile(p("new"), nil, 0o644),
		"write":    openErr(os.OpenFile(p("README"), os.O_WRONLY, 0)),
		"truncate": os.Truncate(p("README"), 0),
		"mkdir":    os.Mkdir(p("d"), 0o755),
		"remove":   os.Remove(p("README")),
		"rmdir":    os.Remove(p("empty")),
		"rename":   os.Rename(p("README"), p("R")),
		"chmod":    os.Chmod(p("README"), 0o600),
		"symlink":  os.Symlink("x", p("l")),
		"link":     os.Link(p("README"), p("hard")),
		"utimes":   os.Chtimes(p("README"), time.Now(), time.Now()),
	} {
		if !errors.Is(err, syscall.EROFS) {
			t.Errorf("%s: %v, want EROFS", what, err)
		}
	}
}

func openErr(f *os.File, err error) error {
	if f != nil {
		f.Close()
	}
	return err
}

func TestMountAllCommits(t *testing.T) {
	s := store.NewTestStore(t)
	c1 := lowerfs.WriteTestCommit(t, s, map[string]lowerfs.TestEntry{"f": {Data: "one"}, "same": {Data: "same"}})
	c2 := lowerfs.WriteTestCommit(t, s, map[string]lowerfs.TestEntry{"f": {Data: "two"}, "same": {Data: "same"}}, c1)
	lowerfs.SetTestBranch(t, s, "main", c1)
	lowerfs.SetTestBranch(t, s, "feature/x", c2)
	mnt, _ := mountTest(t, Config{Store: s, Options: Options{AllCommits: true, BranchTimeout: 10 * time.Millisecond}})

	for c, want := range map[object.ID]string{c1: "one", c2: "two"} {
		if got, err := os.ReadFile(filepath.Join(mnt, c.String(), "f")); err != nil || string(got) != want {
			t.Errorf("%s/f = %q, %v; want %q", c.Short(), got, err, want)
		}
	}
	var a, b syscall.Stat_t
	syscall.Stat(filepath.Join(mnt, c1.String(), "same"), &a)
	syscall.Stat(filepath.Join(mnt, c2.String(), "same"), &b)
	if a.Ino != b.Ino {
		t.Error("an unchanged file has two inode numbers in two Commits")
	}
	expectLink(t, filepath.Join(mnt, c2.String()[:10]), c2.String())
	expectLink(t, filepath.Join(mnt, "branches/main"), "../"+c1.String())
	expectLink(t, filepath.Join(mnt, "branches/feature/x"), "../../"+c2.String())
	if got, err := os.ReadFile(filepath.Join(mnt, "branches/feature/x/f")); err != nil || string(got) != "two" {
		t.Errorf("through branches/feature/x: %q %v", got, err)
	}
	if names := readDirNames(t, filepath.Join(mnt, "branches")); strings.Join(names, ",") != "feature,main" {
		t.Errorf("branches/: %v", names)
	}
	if names := readDirNames(t, mnt); strings.Join(names, ",") != "branches" {
		t.Errorf("root: %v", names)
	}

	// A branch that moves is followed after BranchTimeout; what was reached
	// through it before stays as it was.
	old := filepath.Join(mnt, c1.String(), "f")
	lowerfs.SetTestBranch(t, s, "main", c2)
	time.Sleep(50 * time.Millisecond)
	expectLink(t, filepath.Join(mnt, "branches/main"), "../"+c2.String())
	if got, _ := os.ReadFile(old); string(got) != "one" {
		t.Errorf("%s changed to %q", old, got)
	}
	lowerfs.SetTestBranch(t, s, "later", c1)
	if names := readDirNames(t, filepath.Join(mnt, "branches")); strings.Join(names, ",") != "feature,later,main" {
		t.Errorf("branches/ after a new branch: %v", names)
	}
	for _, missing := range []string{strings.Repeat("0", 64), "zzzz", "main", "L999"} {
		if _, err := os.Lstat(filepath.Join(mnt, missing)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: %v", missing, err)
		}
	}
}

func expectLink(t *testing.T, path, want string) {
	t.Helper()
	if got, err := os.Readlink(path); err != nil || got != want {
		t.Errorf("readlink %s = %q, %v; want %q", path, got, err, want)
	}
}

func TestMountCorruptChunkIsEIO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.layerfs")
	s, err := store.Open(path, store.Options{Create: true, Durability: store.Fast})
	if err != nil {
		t.Fatal(err)
	}
	bad := make([]byte, 5000)
	rand.New(rand.NewSource(2)).Read(bad)
	c := lowerfs.WriteTestCommit(t, s, map[string]lowerfs.TestEntry{"dir/bad": {Data: string(bad)}, "good": {Data: "good"}})
	v, _ := lowerfs.Open(s, c, lowerfs.Options{})
	e, _ := v.Stat("dir/bad")
	s.Close()
	store.CorruptObject(t, path, e.ID)
	if s, err = store.Open(path, store.Options{ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mnt, logged := mountTest(t, Config{Store: s, Commit: c})
	if _, err := os.ReadFile(filepath.Join(mnt, "dir/bad")); !errors.Is(err, syscall.EIO) {
		t.Errorf("read of a corrupt file: %v, want EIO", err)
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "good")); err != nil || string(got) != "good" {
		t.Errorf("other file: %q %v", got, err)
	}
	if l := logged.String(); !strings.Contains(l, e.ID.String()) || !strings.Contains(l, "/dir/bad") {
		t.Errorf("log does not name the object and the path:\n%s", l)
	}
}

// TestMountLargeDirectory lists a directory that takes many READDIRPLUS
// requests, each served by a handle opened for it and seeked to the
// request's offset (see noOpendir).
func TestMountLargeDirectory(t *testing.T) {
	s := store.NewTestStore(t)
	files := map[string]lowerfs.TestEntry{}
	for i := 0; i < 3000; i++ {
		files[fmt.Sprintf("big/file-%04d.txt", i)] = lowerfs.TestEntry{Data: fmt.Sprint(i)}
	}
	c := lowerfs.WriteTestCommit(t, s, files)
	mnt, _ := mountTest(t, Config{Store: s, Commit: c})
	for pass := 0; pass < 2; pass++ { // the second from the kernel's cache
		names := readDirNames(t, filepath.Join(mnt, "big"))
		if len(names) != 3000 || names[0] != "file-0000.txt" || names[2999] != "file-2999.txt" {
			t.Fatalf("pass %d: %d names, %v ... %v", pass, len(names), names[:1], names[len(names)-1:])
		}
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "big", "file-1234.txt")); err != nil || string(got) != "1234" {
		t.Errorf("file-1234.txt: %q %v", got, err)
	}
}

// TestMountThroughSymlinkIsRefused: a second mount given a symlink to a
// live mount point is ErrMounted, as the mount point itself is; mount(2)
// follows the link, so it was stacked on the first.
func TestMountThroughSymlinkIsRefused(t *testing.T) {
	s := store.NewTestStore(t)
	c := lowerfs.WriteTestCommit(t, s, sample(nil))
	mnt, _ := mountTest(t, Config{Store: s, Commit: c})
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(mnt, link); err != nil {
		t.Fatal(err)
	}
	srv, err := Mount(Config{Store: s, Commit: c, Mountpoint: link, Source: "test"})
	if err == nil {
		srv.Unmount()
	}
	if !errors.Is(err, ErrMounted) {
		t.Errorf("mount through a symlink to a live mount: %v, want ErrMounted", err)
	}
}

// TestMountOverTheStoreIsRefused: a mount point that holds the Store is
// refused; mounted, it hid the Store, and SQLite's next connection, opened
// by path, met the mount itself (EIO under parallel reads).
func TestMountOverTheStoreIsRefused(t *testing.T) {
	needFUSE(t)
	s := store.NewTestStore(t)
	c := lowerfs.WriteTestCommit(t, s, sample(nil))
	dir := filepath.Dir(s.Path())
	for _, mnt := range []string{dir, filepath.Dir(dir)} {
		srv, err := Mount(Config{Store: s, Commit: c, Mountpoint: mnt, Source: "test"})
		if err == nil {
			srv.Unmount()
		}
		if !errors.Is(err, store.ErrBadPath) {
			t.Errorf("mount at %s, which holds the Store: %v, want ErrBadPath", mnt, err)
		}
	}
}

// TestMountRaceOneWins: mounts started at once at one mount point each
// check it before any has mounted; one must win and the rest be refused,
// not stacked on it.
func TestMountRaceOneWins(t *testing.T) {
	needFUSE(t)
	s := store.NewTestStore(t)
	c := lowerfs.WriteTestCommit(t, s, sample(nil))
	for round := 0; round < 5; round++ {
		mnt := t.TempDir()
		var mu sync.Mutex
		var won []*Server
		var wg sync.WaitGroup
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				srv, err := Mount(Config{Store: s, Commit: c, Mountpoint: mnt, Source: "test", Logger: log.New(io.Discard, "", 0)})
				if err == nil {
					mu.Lock()
					won = append(won, srv)
					mu.Unlock()
				} else if !errors.Is(err, ErrMounted) {
					t.Errorf("a mount that lost: %v, want ErrMounted", err)
				}
			}()
		}
		wg.Wait()
		for i := len(won) - 1; i >= 0; i-- {
			if err := won[i].Unmount(); err != nil {
				t.Errorf("unmount: %v", err)
			}
		}
		if len(won) != 1 {
			t.Fatalf("round %d: %d of 4 concurrent mounts at one mount point succeeded, want 1", round, len(won))
		}
	}
}
