// Package mountinfo reads the kernel's table of mounts,
// /proc/<pid>/mountinfo, for the packages that look for their own mounts
// in it: fusefs (a stale mount at a mount point) and sessions (stale
// Workspace mounts, the mounts a fresh namespace copied).
package mountinfo

import (
	"bufio"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Self and Thread are the tables of the calling process's and the calling
// thread's mount namespaces (a thread can be in a namespace of its own).
const (
	Self   = "/proc/self/mountinfo"
	Thread = "/proc/thread-self/mountinfo"
)

// Mount is one line of a mountinfo table.
type Mount struct {
	ID        string   // the mount's ID, unique while it is mounted
	Opts      string   // the mount's own options ("rw,nosuid,relatime")
	Point     string   // where it is mounted
	FSType    string   // "overlay", "fuse.layerfs", ...
	Source    string   // what was mounted
	SuperOpts []string // the filesystem's options, "lowerdir=..." for an overlay
	Dev       string   // the filesystem's device, "major:minor"
}

// readBufs recycles Read's buffers: 64 KiB, so a table of hundreds of
// Workspace overlays takes a few reads, and every new Workspace namespace
// reads one.
var readBufs = sync.Pool{New: func() any { return new([64 << 10]byte) }}

// Read reads a table (Self, Thread), in mount order: a mount comes after
// the mounts it is stacked on.
func Read(table string) ([]Mount, error) {
	f, err := os.Open(table)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Mount
	buf := readBufs.Get().(*[64 << 10]byte)
	defer readBufs.Put(buf)
	sc := bufio.NewScanner(f)
	sc.Buffer(buf[:0], 1<<20) // an overlay's options can be long
	for sc.Scan() {
		if m, ok := Parse(sc.Text()); ok {
			out = append(out, m)
		}
	}
	return out, sc.Err()
}

// Parse reads one line: "id parent maj:min root point opts [tags...] -
// fstype source superopts".
func Parse(line string) (Mount, bool) {
	before, after, ok := strings.Cut(line, " - ")
	f, g := strings.Fields(before), strings.Fields(after)
	if !ok || len(f) < 6 || len(g) < 2 {
		return Mount{}, false
	}
	m := Mount{ID: f[0], Opts: f[5], Point: Unescape(f[4]), FSType: g[0], Source: Unescape(g[1]), Dev: f[2]}
	if len(g) > 2 {
		m.SuperOpts = strings.Split(g[2], ",")
	}
	return m, true
}

// Under lists the mount points at or below dir, deepest first, so that
// unmounting them in order never meets one still covered.
func Under(mounts []Mount, dir string) []string {
	var out []string
	for _, m := range mounts {
		if m.Point == dir || strings.HasPrefix(m.Point, dir+"/") {
			out = append(out, m.Point)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// Unescape undoes the kernel's octal escapes (\040 for a space).
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
