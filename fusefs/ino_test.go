package fusefs

import (
	"testing"

	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

func TestInodeNumbersFollowIdentity(t *testing.T) {
	var inos inoTable
	e := store.Entry{Name: "a.go", Type: store.TypeFile, Mode: 0644, Size: 3, MTime: 7, ID: object.Sum(object.KindChunk, []byte("abc"))}
	a := inos.ino(fileIdentity("src/a.go", &e))
	if b := inos.ino(fileIdentity("src/a.go", &e)); a != b {
		t.Errorf("same file: %d and %d", a, b)
	}
	changed := e
	changed.Mode = 0755
	if b := inos.peek(fileIdentity("src/a.go", &changed)); b == a {
		t.Error("a changed mode kept the number")
	}
	if b := inos.peek(fileIdentity("lib/a.go", &e)); b == a {
		t.Error("another path kept the number")
	}
	c1, c2 := object.Sum(object.KindCommit, []byte{1}), object.Sum(object.KindCommit, []byte{2})
	if inos.peek(dirIdentity(c1, "src")) == inos.peek(dirIdentity(c2, "src")) {
		t.Error("directories of two Commits share a number")
	}
	var fresh inoTable
	if fresh.ino(fileIdentity("src/a.go", &e)) != a {
		t.Error("the number depends on the table, not only on the file")
	}
}

func TestInodeCollisionsAreRehashed(t *testing.T) {
	var inos inoTable
	x, y := identity{0: 5, 8: 1}, identity{0: 5, 8: 2} // same first 8 bytes: the same number
	a, b := inos.ino(x), inos.ino(y)
	if a == b {
		t.Fatalf("two live identities share %d", a)
	}
	if inos.ino(x) != a || inos.ino(y) != b {
		t.Error("numbers changed while live")
	}
	inos.forget(a)
	inos.forget(b)
	if inos.ino(y) != a {
		t.Error("after both are forgotten, y should get the plain hash number")
	}
	if r := inos.peek(identity{}); r <= 1 {
		t.Errorf("reserved number %d handed out", r)
	}
}
