package sessions

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/layerfs/layerfs/api"
)

func TestDirEmpty(t *testing.T) {
	dir := t.TempDir()
	if empty, err := dirEmpty(dir); err != nil || !empty {
		t.Errorf("an empty directory: %v, %v", empty, err)
	}
	if err := os.WriteFile(dir+"/.wh.x", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if empty, err := dirEmpty(dir); err != nil || empty {
		t.Errorf("a directory with an entry: %v, %v", empty, err)
	}
	if _, err := dirEmpty(dir + "/missing"); err == nil {
		t.Error("a missing directory: no error")
	}
}

// TestCheckCreatePathKernelLimits: a create's path the kernel would
// refuse (a NUL byte, a name over 255 bytes, over PATH_MAX) is a bad
// request (400), not the internal error (500) its failed mkdir was.
func TestCheckCreatePathKernelLimits(t *testing.T) {
	for _, p := range []string{"/workspace\x00x", "/srv/" + strings.Repeat("a", 256), "/" + strings.Repeat("a/", 2048) + "a"} {
		req := api.CreateRequest{Path: p}
		if err := checkCreate(&req); !errors.Is(err, ErrBadRequest) {
			t.Errorf("path of %d bytes: %v, want %v", len(p), err, ErrBadRequest)
		}
	}
	for _, p := range []string{"/srv/" + strings.Repeat("a", 255), "/usr/src/app"} {
		req := api.CreateRequest{Path: p}
		if err := checkCreate(&req); err != nil {
			t.Errorf("path %.40q: %v", p, err)
		}
	}
}
