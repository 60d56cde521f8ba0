package fusefs

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/layerfs/layerfs/object"
)

// Defaults for Options left zero.
const (
	DefaultEntryTimeout  = 24 * time.Hour
	DefaultBranchTimeout = time.Second
)

// Options tune a mount. The zero value means the defaults.
type Options struct {
	// EntryTimeout is how long the kernel keeps entries, attributes and
	// failed lookups inside a Commit, which never change.
	EntryTimeout time.Duration
	// BranchTimeout is how long a branches/<name> or root link is kept
	// before its ref is resolved again.
	BranchTimeout time.Duration
	// CacheBytes bounds the cache of decompressed chunks, extent nodes and
	// trees; 0 means lowerfs.DefaultCacheBytes.
	CacheBytes int64
	// ReadAhead bounds read-ahead past a sequential reader; 0 means
	// lowerfs.DefaultReadAhead, negative turns it off.
	ReadAhead int64
	// AllowOther lets users other than the mounter read the mount; the
	// kernel then checks the stored modes and owners (default_permissions).
	AllowOther bool
	// AllCommits mounts every Commit (see the package doc) instead of one.
	AllCommits bool
	// Debug logs every FUSE request.
	Debug bool
	// Log names a file the server logs to; "" means standard error.
	Log string
	// MountFlags are mount(8)'s suid, dev and exec flags and their no-
	// forms, passed to the kernel; nosuid and nodev are the default.
	MountFlags []string
	// DataRedirect, if set, names the data file of content id, size bytes,
	// in an overlayfs data-only layer (see fileNode.Getxattr); "" for
	// none. Only then does the mount answer getxattr at all.
	DataRedirect func(id object.ID, size int64) string
}

func (o Options) entryTimeout() time.Duration {
	return orDefault(o.EntryTimeout, DefaultEntryTimeout)
}

func (o Options) branchTimeout() time.Duration {
	return orDefault(o.BranchTimeout, DefaultBranchTimeout)
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// ignoredOptions are mount(8) and fstab options that mean nothing here.
var ignoredOptions = map[string]bool{
	"ro": true, "defaults": true, "auto": true, "noauto": true, "user": true, "nouser": true,
	"users": true, "_netdev": true, "nofail": true, "atime": true, "noatime": true,
	"relatime": true, "norelatime": true, "strictatime": true, "lazytime": true,
	"default_permissions": true, "async": true,
	"rw": true, // mount(8) may pass it; layerfs mounts are read-only regardless
}

var mountFlagOptions = map[string]bool{
	"suid": true, "nosuid": true, "dev": true, "nodev": true, "exec": true, "noexec": true,
}

// ParseOptions reads a mount -o list: comma-separated, as mount(8) passes
// it. See the layerfs mount help for the keys.
func ParseOptions(s string) (Options, error) {
	o := Options{AllowOther: true}
	for _, kv := range strings.Split(s, ",") {
		key, val, _ := strings.Cut(kv, "=")
		if err := o.set(key, val); err != nil {
			return o, fmt.Errorf("mount option %q: %w", kv, err)
		}
	}
	return o, nil
}

func (o *Options) set(key, val string) error {
	var err error
	switch {
	case key == "" || ignoredOptions[key] || strings.HasPrefix(key, "x-"):
	case mountFlagOptions[key]:
		o.MountFlags = append(o.MountFlags, key)
	case key == "allow_other":
		o.AllowOther = true
	case key == "noallow_other":
		o.AllowOther = false
	case key == "all_commits":
		o.AllCommits = true
	case key == "debug":
		o.Debug = true
	case key == "log":
		o.Log = val
	case key == "cache_size":
		o.CacheBytes, err = parseSize(val)
	case key == "readahead":
		if o.ReadAhead, err = parseSize(val); o.ReadAhead == 0 {
			o.ReadAhead = -1 // off
		}
	case key == "entry_timeout":
		o.EntryTimeout, err = duration(val)
	case key == "branch_timeout":
		o.BranchTimeout, err = duration(val)
	default:
		return ErrBadOption
	}
	return err
}

// duration reads a timeout: a Go duration, not negative. Zero, which in
// Options means the default, becomes a nanosecond: as good as no caching,
// which is what the user asked for.
func duration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err == nil && d < 0 {
		err = fmt.Errorf("%s is negative", s)
	}
	if err == nil && d == 0 {
		d = time.Nanosecond
	}
	return d, err
}

// parseSize reads a byte count with an optional K, M or G suffix (powers
// of 1024).
func parseSize(s string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "K"), strings.HasSuffix(s, "k"):
		mult = 1 << 10
	case strings.HasSuffix(s, "M"), strings.HasSuffix(s, "m"):
		mult = 1 << 20
	case strings.HasSuffix(s, "G"), strings.HasSuffix(s, "g"):
		mult = 1 << 30
	}
	if mult > 1 {
		s = s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q: %w", s, ErrBadOption)
	}
	return n * mult, nil
}
