package fusefs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/lowerfs"
	"github.com/layerfs/layerfs/store"
)

func TestSlot(t *testing.T) {
	s := store.NewTestStore(t)
	c1 := lowerfs.WriteTestCommit(t, s, map[string]lowerfs.TestEntry{"f": {Data: "one"}, "d/x": {Data: "x"}})
	c2 := lowerfs.WriteTestCommit(t, s, map[string]lowerfs.TestEntry{"f": {Data: "two"}, "d/x": {Data: "x"}}, c1)
	srv, _ := mountServer(t, Config{Store: s, Options: Options{AllCommits: true}})
	mnt := srv.Mountpoint()

	// A name not handed out yet is missing, and not remembered as missing.
	if _, err := os.Lstat(filepath.Join(mnt, slotsName, "1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a Slot before it was made: %v", err)
	}
	sl, err := srv.NewSlot()
	if err != nil {
		t.Fatal(err)
	}
	if sl.Path() != filepath.Join(mnt, slotsName, "1") {
		t.Fatalf("Path = %s", sl.Path())
	}

	// Before Bind: a directory, whose content is an error, not "missing".
	if fi, err := os.Stat(sl.Path()); err != nil || !fi.IsDir() {
		t.Fatalf("stat an unbound Slot: %v, %v", fi, err)
	}
	if _, err := os.Lstat(filepath.Join(sl.Path(), "f")); !errors.Is(err, syscall.EIO) {
		t.Errorf("lookup in an unbound Slot: %v, want EIO", err)
	}
	if _, err := os.ReadDir(sl.Path()); !errors.Is(err, syscall.EIO) {
		t.Errorf("list an unbound Slot: %v, want EIO", err)
	}

	if err := sl.Bind(c2); err != nil {
		t.Fatal(err)
	}
	if err := sl.Bind(c1); err == nil {
		t.Error("a Slot was bound twice")
	}
	if got, err := os.ReadFile(filepath.Join(sl.Path(), "f")); err != nil || string(got) != "two" {
		t.Errorf("f = %q, %v; want two", got, err)
	}
	if got, err := os.ReadFile(filepath.Join(sl.Path(), "d/x")); err != nil || string(got) != "x" {
		t.Errorf("d/x = %q, %v", got, err)
	}
	if names := readDirNames(t, sl.Path()); strings.Join(names, ",") != "d,f" {
		t.Errorf("listing: %v", names)
	}
	// Files are the Commit's own nodes; directories are the Slot's.
	ino := func(p string) uint64 {
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	if ino(filepath.Join(sl.Path(), "f")) != ino(filepath.Join(mnt, c2.String(), "f")) {
		t.Error("a file seen through a Slot is another node than in its Commit")
	}
	if ino(filepath.Join(sl.Path(), "d")) == ino(filepath.Join(mnt, c2.String(), "d")) {
		t.Error("a directory has two parents: the Slot and its Commit")
	}
	if names := readDirNames(t, filepath.Join(mnt, slotsName)); len(names) != 0 {
		t.Errorf(".slots lists %v", names)
	}

	sl.Release()
	next, err := srv.NewSlot()
	if err != nil {
		t.Fatal(err)
	}
	defer next.Release()
	if next.Path() == sl.Path() {
		t.Error("a released Slot's name was handed out again")
	}
}

// TestSlotUnderOverlay mounts an overlay over an unbound Slot, as the
// Workspace daemon does while a commit is under way, binds it, and reads
// and writes through the overlay.
func TestSlotUnderOverlay(t *testing.T) {
	s := store.NewTestStore(t)
	c1 := lowerfs.WriteTestCommit(t, s, map[string]lowerfs.TestEntry{"f": {Data: "one"}, "d/x": {Data: "x"}})
	srv, _ := mountServer(t, Config{Store: s, Options: Options{AllCommits: true}})
	sl, err := srv.NewSlot()
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Release()
	dir := t.TempDir()
	upper, work, ovl := filepath.Join(dir, "upper"), filepath.Join(dir, "work"), filepath.Join(dir, "ovl")
	for _, p := range []string{upper, work, ovl} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	opts := "lowerdir=" + sl.Path() + ",upperdir=" + upper + ",workdir=" + work + ",redirect_dir=on,index=off,xino=off"
	if err := unix.Mount("overlay", ovl, "overlay", 0, opts); err != nil {
		t.Skipf("no overlayfs over FUSE here: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(ovl, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount the overlay: %v", err)
		}
	})
	if err := sl.Bind(c1); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(ovl, "f")); err != nil || string(got) != "one" {
		t.Errorf("f through the overlay = %q, %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(ovl, "d/x"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(upper, "d/x")); err != nil || string(got) != "changed" {
		t.Errorf("upper d/x = %q, %v", got, err)
	}
	if names := readDirNames(t, ovl); strings.Join(names, ",") != "d,f" {
		t.Errorf("overlay listing: %v", names)
	}
}
