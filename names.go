package layerfs

import (
	"sort"
	"strconv"
	"unicode/utf8"
)

// sortNames orders names bytewise, the order trees keep.
func sortNames(names []string) { sort.Strings(names) }

// QuotePath returns a path as listings and diffs print it: as it is,
// unless it holds a control character, a quote, a backslash or bytes that
// are not UTF-8 — then quoted, C-style, as git does — so that one path
// stays on one line and cannot pass for two, or for a diff's own lines.
func QuotePath(s string) string {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == '"' || r == '\\' || r == utf8.RuneError {
			return strconv.Quote(s)
		}
	}
	return s
}
