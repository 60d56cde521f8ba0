package main

import (
	"testing"

	"github.com/layerfs/layerfs/store"
)

func TestLsMode(t *testing.T) {
	for _, c := range []struct {
		t    store.EntryType
		mode uint32
		want string
	}{
		{store.TypeFile, 0o644, "-rw-r--r--"},
		{store.TypeDir, 0o750, "drwxr-x---"},
		{store.TypeSymlink, 0o777, "lrwxrwxrwx"},
		{store.TypeFile, 0o4755, "-rwsr-xr-x"},
		{store.TypeFile, 0o2644, "-rw-r-Sr--"},
		{store.TypeDir, 0o1777, "drwxrwxrwt"},
		{store.TypeDir, 0o1776, "drwxrwxrwT"},
		{store.TypeDir, 0, "d---------"},
	} {
		if got := lsMode(c.t, c.mode); got != c.want {
			t.Errorf("lsMode(%v, %o) = %s, want %s", c.t, c.mode, got, c.want)
		}
	}
}
