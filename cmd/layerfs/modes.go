package main

import (
	"strings"

	"github.com/layerfs/layerfs"
	"github.com/layerfs/layerfs/store"
)

// lsMode renders an entry's type and mode as ls -l does: "drwxr-x---",
// "lrwxrwxrwx", "-rwsr-xr-x" (setuid), "drwxrwxrwt" (sticky).
func lsMode(t store.EntryType, mode uint32) string {
	b := []byte("----------")
	switch t {
	case store.TypeDir:
		b[0] = 'd'
	case store.TypeSymlink:
		b[0] = 'l'
	}
	for i, c := range "rwxrwxrwx" {
		if mode&(1<<(8-i)) != 0 {
			b[1+i] = byte(c)
		}
	}
	// setuid, setgid and sticky show in the x places: lower case with x.
	for _, s := range []struct {
		bit uint32
		at  int
		c   byte
	}{{0o4000, 3, 's'}, {0o2000, 6, 's'}, {0o1000, 9, 't'}} {
		if mode&s.bit != 0 {
			if b[s.at] == 'x' {
				b[s.at] = s.c
			} else {
				b[s.at] = s.c - 'a' + 'A'
			}
		}
	}
	return string(b)
}

// quoteName returns a path as the human-readable listings print it
// (layerfs.QuotePath).
func quoteName(s string) string { return layerfs.QuotePath(s) }

// quoteNames joins paths with sep, each as quoteName prints it: a name
// holding a newline does not break the line it is listed on.
func quoteNames(paths []string, sep string) string {
	q := make([]string, len(paths))
	for i, p := range paths {
		q[i] = quoteName(p)
	}
	return strings.Join(q, sep)
}

// firstLine is a message's first line, marked when there is more.
func firstLine(msg string) string {
	if line, _, more := strings.Cut(msg, "\n"); more {
		return line + " …"
	}
	return msg
}
