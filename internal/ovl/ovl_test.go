package ovl

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// An attribute set reads back; a missing one is "" and false, not an
// error; a missing file is an error naming it.
func TestGetHas(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	const name = "user.layerfs.test"
	if err := unix.Lsetxattr(p, name, []byte("y"), 0); err != nil {
		t.Skipf("no user xattrs here: %v", err)
	}
	if v, err := Get(p, name); v != "y" || err != nil {
		t.Fatalf("Get = %q, %v", v, err)
	}
	if has, err := Has(p, name); !has || err != nil {
		t.Fatalf("Has = %v, %v", has, err)
	}
	if v, err := Get(p, "user.layerfs.none"); v != "" || err != nil {
		t.Fatalf("Get of a missing attribute = %q, %v", v, err)
	}
	if has, err := Has(p, "user.layerfs.none"); has || err != nil {
		t.Fatalf("Has of a missing attribute = %v, %v", has, err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if v, err := FGet(int(f.Fd()), p, name); v != "y" || err != nil {
		t.Fatalf("FGet = %q, %v", v, err)
	}
	if has, err := FHas(int(f.Fd()), p, name); !has || err != nil {
		t.Fatalf("FHas = %v, %v", has, err)
	}
	if v, err := FGet(int(f.Fd()), p, "user.layerfs.none"); v != "" || err != nil {
		t.Fatalf("FGet of a missing attribute = %q, %v", v, err)
	}
	if has, err := FHas(int(f.Fd()), p, "user.layerfs.none"); has || err != nil {
		t.Fatalf("FHas of a missing attribute = %v, %v", has, err)
	}
	gone := filepath.Join(dir, "gone")
	if _, err := Has(gone, name); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Has of a missing file: %v", err)
	}
	if _, err := Get(gone, name); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Get of a missing file: %v", err)
	}
}
