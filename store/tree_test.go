package store

import (
	"errors"
	"reflect"
	"testing"

	"github.com/layerfs/layerfs/object"
)

func sampleTree() *Tree {
	return &Tree{Entries: []Entry{
		{Name: "a.txt", Type: TypeFile, Mode: 0644, UID: 1000, GID: 1000, Size: 5, MTime: 1700000000123456789, ID: object.Sum(object.KindChunk, []byte("hello"))},
		{Name: "bin", Type: TypeDir, Mode: 0755, MTime: -5, ID: object.Sum(object.KindTree, []byte{0})},
		{Name: "link", Type: TypeSymlink, Mode: 0777, Size: 5, Target: "a.txt"},
		{Name: "suid", Type: TypeFile, Mode: 04755, Size: 0, ID: object.Sum(object.KindChunk, nil)},
	}}
}

func TestTreeRoundTrip(t *testing.T) {
	tr := sampleTree()
	data, err := tr.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeTree(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, tr) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, tr)
	}
	if e, ok := got.Lookup("link"); !ok || e.Target != "a.txt" {
		t.Error("lookup link")
	}
	if _, ok := got.Lookup("b"); ok {
		t.Error("lookup of a missing name succeeded")
	}
}

func TestTreeRefusesBadEntries(t *testing.T) {
	for name, mutate := range map[string]func(*Tree){
		"unsorted":  func(t *Tree) { t.Entries[0], t.Entries[1] = t.Entries[1], t.Entries[0] },
		"duplicate": func(t *Tree) { t.Entries[1].Name = "a.txt" },
		"slash":     func(t *Tree) { t.Entries[0].Name = "a/b" },
		"dotdot":    func(t *Tree) { t.Entries[0].Name = ".." },
		"mode":      func(t *Tree) { t.Entries[0].Mode = 0100644 },
		"type":      func(t *Tree) { t.Entries[0].Type = 9 },
	} {
		tr := sampleTree()
		mutate(tr)
		if _, err := tr.Encode(); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
}

func TestCommitRoundTrip(t *testing.T) {
	c := &Commit{Tree: object.Sum(object.KindTree, nil), Parents: []object.ID{object.Sum(object.KindCommit, []byte{1}), object.Sum(object.KindCommit, []byte{2})},
		Origin: "workspace_session:ws-17", Message: "edit\nmore", Time: 1700000000000000000}
	got, err := DecodeCommit(c.Encode())
	if err != nil || !reflect.DeepEqual(got, c) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	if _, err := DecodeCommit(c.Encode()[:40]); !errors.Is(err, ErrCorrupt) {
		t.Errorf("truncated commit: %v", err)
	}
	if _, err := DecodeCommit(append(c.Encode(), 0)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("trailing bytes: %v", err)
	}
}

func FuzzDecodeTree(f *testing.F) {
	data, _ := sampleTree().Encode()
	f.Add(data)
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		tr, err := DecodeTree(b)
		if err != nil {
			return
		}
		again, err := tr.Encode()
		if err != nil {
			t.Fatalf("decoded tree does not encode: %v", err)
		}
		if tr2, err := DecodeTree(again); err != nil || !reflect.DeepEqual(tr, tr2) {
			t.Fatalf("re-decode differs: %v", err)
		}
	})
}

func FuzzDecodeCommit(f *testing.F) {
	f.Add((&Commit{Origin: "operation:x", Message: "m"}).Encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCommit(b)
		if err != nil {
			return
		}
		if c2, err := DecodeCommit(c.Encode()); err != nil || !reflect.DeepEqual(c, c2) {
			t.Fatalf("re-decode differs: %v", err)
		}
	})
}
