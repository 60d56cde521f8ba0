package sessions

import (
	"errors"
	"io"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/layerfs/layerfs/store"
)

// TestRestoreDropsLeasesOfUnrecordedWorkspaces: at a restart, the Leases
// of Workspace directories that hold no record — a create a crash cut
// short between its Lease and its record (the directories made, the
// record not saved), a spare taken the same way, an ended Workspace —
// are released, and the directories removed; a directory whose record is
// there but unreadable keeps its Lease, as do other daemons' Leases.
func TestRestoreDropsLeasesOfUnrecordedWorkspaces(t *testing.T) {
	s := store.NewTestStore(t)
	b := s.NewBatch()
	tree, _ := b.PutTree(&store.Tree{})
	commit, _ := b.PutCommit(&store.Commit{Tree: tree, Origin: store.OriginInit, Time: 1})
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	d := &Daemon{cfg: Config{StateDir: state}, s: s, log: log.New(io.Discard, "", 0), ws: map[string]*workspace{},
		id: "host:2:" + state + "@inst"}
	mkdir := func(parts ...string) {
		if err := os.MkdirAll(d.dir(parts...), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write := func(data string, parts ...string) {
		if err := os.WriteFile(d.dir(parts...), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"ws-unfinished", "ws-spare", "ws-ended", "ws-unreadable", "ws-other"} {
		mkdir("ws", id, "upper-0")
		mkdir("ws", id, "work-0")
		mkdir("mnt", id)
		holder := "host:1:" + state + "@inst" // the crashed daemon's
		if id == "ws-other" {
			holder = "host:1:" + state + "-other@inst"
		}
		if err := s.SetLease(id, "main", holder, commit); err != nil {
			t.Fatal(err)
		}
	}
	write("", "ws", "ws-spare", spareMarker)
	write("", "ws", "ws-ended", endedMarker)
	write("{not json", "ws", "ws-unreadable", "state.json")
	if err := d.restore(); err != nil {
		t.Fatal(err)
	}
	janitor.waitIdle()
	leases, err := s.Leases()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, l := range leases {
		ids = append(ids, l.ID)
	}
	if want := []string{"ws-other", "ws-unreadable"}; !slices.Equal(ids, want) {
		t.Errorf("leases after the restore: %v, want %v", ids, want)
	}
	for _, id := range []string{"ws-unfinished", "ws-spare"} {
		for _, p := range []string{d.dir("ws", id), d.dir("mnt", id)} {
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				t.Errorf("%s after the restore: %v", filepath.Base(filepath.Dir(p))+"/"+id, err)
			}
		}
	}
	if _, err := os.Stat(d.dir("ws", "ws-unreadable", "state.json")); err != nil {
		t.Errorf("the unreadable record: %v", err)
	}
	if u, ok := d.unrestored["ws-unreadable"]; !ok || len(d.unrestored) != 1 || !strings.Contains(u.Error, "workspace record") {
		t.Errorf("not restored: %+v, want ws-unreadable alone, with its reason", d.unrestored)
	}
	if _, err := d.get("ws-unreadable"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "could not restore") {
		t.Errorf("a request for the Workspace not restored: %v", err)
	}
	// Given up: refused without discard, removed for good with it.
	if err := d.End("ws-unreadable", false); !errors.Is(err, ErrDirty) || !strings.Contains(err.Error(), "discard") {
		t.Errorf("an end without discard of the Workspace not restored: %v", err)
	}
	if err := d.End("ws-unreadable", true); err != nil {
		t.Errorf("an end with discard of the Workspace not restored: %v", err)
	}
	janitor.waitIdle()
	if leases, err := s.Leases(); err != nil || len(leases) != 1 || leases[0].ID != "ws-other" {
		t.Errorf("leases after its end: %+v, %v", leases, err)
	}
	for _, p := range []string{d.dir("ws", "ws-unreadable"), d.dir("mnt", "ws-unreadable")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s after its end: %v", p, err)
		}
	}
	if _, err := d.get("ws-unreadable"); !errors.Is(err, ErrNotFound) || len(d.unrestored) != 0 {
		t.Errorf("a request after its end: %v (not restored: %+v)", err, d.unrestored)
	}
}
