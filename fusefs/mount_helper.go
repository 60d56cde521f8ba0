package fusefs

import (
	"fmt"
	"os"
	"strings"
)

// ParseHelperArgs reads the arguments mount(8) gives an external helper,
// mount.fuse.layerfs SOURCE MOUNTPOINT [-sfnv] [-N ns] [-o OPTIONS]
// [-t TYPE], where SOURCE is STORE#REF, or STORE alone for an all-commits
// mount. The request it returns starts a background server.
func ParseHelperArgs(args []string) (Request, error) {
	var pos []string
	opts := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-o" || a == "-t" || a == "-N":
			if i+1 == len(args) {
				return Request{}, fmt.Errorf("%s needs a value: %w", a, ErrBadOption)
			}
			if a == "-N" {
				return Request{}, fmt.Errorf("-N (mount namespaces) is not supported: %w", ErrBadOption)
			}
			if a == "-o" {
				opts = joinOptions(opts, args[i+1])
			}
			i++
		case strings.HasPrefix(a, "-o"):
			opts = joinOptions(opts, a[2:])
		case strings.HasPrefix(a, "-") && len(a) > 1:
			// -s (sloppy), -f (fake), -n (no mtab), -v (verbose): nothing to do
		default:
			pos = append(pos, a)
		}
	}
	if len(pos) != 2 {
		return Request{}, fmt.Errorf("want SOURCE MOUNTPOINT, got %d arguments: %w", len(pos), ErrBadSource)
	}
	return helperRequest(pos[0], pos[1], opts)
}

func helperRequest(source, mountpoint, opts string) (Request, error) {
	o, err := ParseOptions(opts)
	if err != nil {
		return Request{}, err
	}
	// STORE#REF, split at the last '#' (a ref has none; a directory
	// may), unless the whole of it is the Store.
	storePath, ref, hasRef := source, "", false
	if fi, err := os.Stat(source); err != nil || !fi.Mode().IsRegular() {
		if i := strings.LastIndexByte(source, '#'); i >= 0 {
			storePath, ref, hasRef = source[:i], source[i+1:], true
		}
	}
	if storePath == "" || hasRef && ref == "" {
		return Request{}, fmt.Errorf("%q: %w", source, ErrBadSource)
	}
	if !hasRef {
		o.AllCommits = true
	}
	if o.AllCommits && hasRef {
		return Request{}, fmt.Errorf("%q: all_commits takes a Store without #REF: %w", source, ErrBadSource)
	}
	return Request{StorePath: storePath, Ref: ref, Mountpoint: mountpoint, Options: o}, nil
}

func joinOptions(a, b string) string {
	if a == "" {
		return b
	}
	return a + "," + b
}
