package fusefs

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func TestParseOptions(t *testing.T) {
	o, err := ParseOptions("ro,defaults,noauto,x-systemd.automount,cache_size=64M,readahead=0,entry_timeout=1h,branch_timeout=250ms,noallow_other,suid,all_commits,log=/tmp/l")
	if err != nil {
		t.Fatal(err)
	}
	want := Options{EntryTimeout: time.Hour, BranchTimeout: 250 * time.Millisecond, CacheBytes: 64 << 20,
		ReadAhead: -1, AllCommits: true, Log: "/tmp/l", MountFlags: []string{"suid"}}
	if !reflect.DeepEqual(o, want) {
		t.Errorf("got %+v\nwant %+v", o, want)
	}
	if o, _ := ParseOptions(""); !o.AllowOther || o.entryTimeout() != DefaultEntryTimeout || o.branchTimeout() != DefaultBranchTimeout {
		t.Errorf("defaults: %+v", o)
	}
	// 0 means no caching, not the default.
	if o, err := ParseOptions("entry_timeout=0,branch_timeout=0s"); err != nil || o.entryTimeout() > time.Millisecond || o.branchTimeout() > time.Millisecond {
		t.Errorf("timeouts of 0: entry %v, branch %v, %v", o.entryTimeout(), o.branchTimeout(), err)
	}
	for _, bad := range []string{"frobnicate", "cache_size=lots", "readahead=-1", "entry_timeout=soon", "cache_size=99999999999G", "readahead=9223372036854775807K"} {
		if _, err := ParseOptions(bad); !errors.Is(err, ErrBadOption) && err == nil {
			t.Errorf("%q: %v, want an error", bad, err)
		}
	}
}

func TestParseHelperArgs(t *testing.T) {
	req, err := ParseHelperArgs([]string{"/s/p.layerfs#feature/x", "/mnt/p", "-n", "-o", "ro,cache_size=1G", "-t", "fuse.layerfs"})
	if err != nil {
		t.Fatal(err)
	}
	if req.StorePath != "/s/p.layerfs" || req.Ref != "feature/x" || req.Mountpoint != "/mnt/p" ||
		req.Options.CacheBytes != 1<<30 || req.Options.AllCommits || req.Foreground {
		t.Errorf("got %+v", req)
	}
	req, err = ParseHelperArgs([]string{"/s/p.layerfs", "/mnt/p", "-oro"})
	if err != nil || !req.Options.AllCommits || req.Ref != "" {
		t.Errorf("a Store without #REF: %+v, %v", req, err)
	}
	// A '#' in the Store's directory: the ref is after the last one; a
	// Store whose own name has one is taken whole.
	req, err = ParseHelperArgs([]string{"/s/team#1/p.layerfs#main", "/mnt/p"})
	if err != nil || req.StorePath != "/s/team#1/p.layerfs" || req.Ref != "main" {
		t.Errorf("a '#' in the Store's directory: %+v, %v", req, err)
	}
	odd := filepath.Join(t.TempDir(), "p#1.layerfs")
	if err := os.WriteFile(odd, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	req, err = ParseHelperArgs([]string{odd, "/mnt/p"})
	if err != nil || req.StorePath != odd || req.Ref != "" || !req.Options.AllCommits {
		t.Errorf("a Store named with a '#': %+v, %v", req, err)
	}
	for _, bad := range [][]string{
		{"/s/p.layerfs#main"},
		{"/s/p.layerfs#", "/mnt"},
		{"#main", "/mnt"},
		{"/s/p.layerfs#main", "/mnt", "-o", "all_commits"},
		{"/s/p.layerfs#main", "/mnt", "-o"},
		{"/s/p.layerfs#main", "/mnt", "-o", "entry_timeout=-5s"},
		{"/s/p.layerfs#main", "/mnt", "-N", "/proc/1/ns/mnt"},
	} {
		if _, err := ParseHelperArgs(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
