package integration

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/layerfs/layerfs"
	"github.com/layerfs/layerfs/publish"
	"github.com/layerfs/layerfs/store"
)

// TestStoreFullDisk: a Store on a filesystem that fills up. Writes fail
// with an error that says the disk is full, the branch stays at the last
// Commit that landed, and once there is room again every landed file
// reads back, fsck is clean and writing goes on.
func TestStoreFullDisk(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	path := filepath.Join(dir, "full.layerfs")
	src := t.TempDir()
	writeTree(t, src, map[string]string{"README": "a tree to start from\n"})
	if out, err := exec.Command(layerfsBin, "init", "--store", path, src).CombinedOutput(); err != nil {
		t.Fatalf("init: %v: %s", err, out)
	}
	st, err := layerfs.Open(path, layerfs.Options{Durability: store.Normal})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { st.Close() }()
	f, err := st.FS("main")
	if err != nil {
		t.Fatal(err)
	}
	landed := map[string][]byte{}
	var head string
	var failure error
	for i := 0; i < 200 && failure == nil; i++ {
		p := fmt.Sprintf("f%03d.bin", i)
		data := randomBytes(int64(i), 256<<10) // incompressible: 256 KiB stored each
		res, err := f.Write(p, data, layerfs.Call{})
		switch {
		case err != nil:
			failure = err
		case res.Status != publish.Committed:
			t.Fatalf("write %s: %s", p, res.Status)
		default:
			landed[p], head = data, res.Commit.String()
		}
	}
	if failure == nil {
		t.Fatal("50 MiB went into a 6 MiB filesystem without an error")
	}
	if !errors.Is(failure, syscall.ENOSPC) && !strings.Contains(failure.Error(), "full") {
		t.Errorf("the error does not say the disk is full: %v", failure)
	}
	if len(landed) == 0 {
		t.Fatal("nothing landed before the disk filled")
	}
	t.Logf("%d writes landed, then: %v", len(landed), failure)

	// Room again: the Store is whole and takes writes.
	if out, err := exec.Command("mount", "-o", "remount,size=64m", dir).CombinedOutput(); err != nil {
		t.Fatalf("grow tmpfs: %v: %s", err, out)
	}
	st.Close()
	if st, err = layerfs.Open(path, layerfs.Options{Durability: store.Normal}); err != nil {
		t.Fatal(err)
	}
	if f, err = st.FS("main"); err != nil {
		t.Fatal(err)
	}
	if got := f.Base().String(); got != head {
		t.Errorf("main is at %s, want the last Commit that landed, %s", got, head)
	}
	for p, want := range landed {
		got, err := f.Read(p)
		if err != nil || string(got) != string(want) {
			t.Fatalf("%s after the full disk: %d bytes, %v; want %d bytes as written", p, len(got), err, len(want))
		}
	}
	if res, err := f.Write("after.txt", []byte("room again\n"), layerfs.Call{}); err != nil || res.Status != publish.Committed {
		t.Fatalf("write with room again: %v, %v", res, err)
	}
	if out, err := exec.Command(layerfsBin, "fsck", "--store", path).CombinedOutput(); err != nil {
		t.Fatalf("fsck: %v: %s", err, out)
	}
}
