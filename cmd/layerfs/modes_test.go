package main

import (
	"os"
	"path/filepath"
	"strings"
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

func TestQuoteName(t *testing.T) {
	for in, want := range map[string]string{
		"plain.go":       "plain.go",
		"with space":     "with space",
		"naïve € ok":     "naïve € ok",
		"two\nlines":     `"two\nlines"`,
		"tab\there":      `"tab\there"`,
		`quo"te`:         `"quo\"te"`,
		`back\slash`:     `"back\\slash"`,
		"bad\xffutf8":    `"bad\xffutf8"`,
		"esc\x1b[31mred": `"esc\x1b[31mred"`,
	} {
		if got := quoteName(in); got != want {
			t.Errorf("quoteName(%q) = %s, want %s", in, got, want)
		}
	}
	if got := firstLine("subject\n\nbody"); got != "subject …" {
		t.Errorf("firstLine: %q", got)
	}
}

// TestCLIListsQuoteOddNames: a name with a newline stays on one line.
func TestCLIListsQuoteOddNames(t *testing.T) {
	dir := testTree(t)
	if err := os.WriteFile(filepath.Join(dir, "two\nlines"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(t.TempDir(), "s.layerfs")
	mustRun(t, "init", "--store", store, dir)
	out := mustRun(t, "ls", "--store", store, "main")
	if !strings.Contains(out, `"two\nlines"`+"\n") || strings.Count(out, "\n") != 4 {
		t.Errorf("ls:\n%s", out)
	}
}
