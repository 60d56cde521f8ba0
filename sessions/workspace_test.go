package sessions

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

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

// TestListDoesNotWaitForACommit: List answers while a commit (or discard,
// or end) holds a Workspace, describing it as it was before; it waited
// for the commit to finish, which a client could not tell from a wedged
// daemon.
func TestListDoesNotWaitForACommit(t *testing.T) {
	d := &Daemon{cfg: Config{StateDir: t.TempDir()}, ws: map[string]*workspace{}}
	w := &workspace{d: d, rec: record{ID: "ws-000000000001", Branch: "main", Commits: 1}}
	d.ws[w.rec.ID] = w
	if got := d.List(); len(got) != 1 || got[0].Commits != 1 {
		t.Fatalf("list: %+v", got)
	}
	w.mu.Lock() // a commit under way
	w.rec.Commits = 2
	listed := make(chan []api.Workspace, 1)
	go func() { listed <- d.List() }()
	select {
	case got := <-listed:
		if len(got) != 1 || got[0].ID != w.rec.ID || got[0].Commits != 1 {
			t.Errorf("list during a commit: %+v, want the Workspace as before it", got)
		}
	case <-time.After(10 * time.Second):
		w.mu.Unlock()
		t.Fatal("list waited for the commit")
	}
	w.mu.Unlock()
	if got := d.List(); len(got) != 1 || got[0].Commits != 2 {
		t.Errorf("list after the commit: %+v", got)
	}
}
