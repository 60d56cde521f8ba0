package fusefs

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// fsType is the filesystem type of every layerfs mount, as /proc/mounts
// shows it.
const fsType = "fuse.layerfs"

// mountEntry is one line of /proc/self/mountinfo.
type mountEntry struct {
	Point  string
	FSType string
	Source string
}

// mountAt returns the topmost mount at the absolute path p, if any.
func mountAt(p string) (mountEntry, bool) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return mountEntry{}, false
	}
	defer f.Close()
	var top mountEntry
	found := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m, ok := parseMountinfo(sc.Text()); ok && m.Point == p {
			top, found = m, true // later lines are mounted on top
		}
	}
	return top, found
}

// parseMountinfo reads "id parent maj:min root point opts [tags] - type source superopts".
func parseMountinfo(line string) (mountEntry, bool) {
	before, after, ok := strings.Cut(line, " - ")
	f, g := strings.Fields(before), strings.Fields(after)
	if !ok || len(f) < 5 || len(g) < 2 {
		return mountEntry{}, false
	}
	return mountEntry{Point: unescapeMount(f[4]), FSType: g[0], Source: unescapeMount(g[1])}, true
}

// unescapeMount undoes the kernel's octal escapes (\040 for a space).
func unescapeMount(s string) string {
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
