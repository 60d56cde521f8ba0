package sessions

import (
	"fmt"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/internal/mountinfo"
)

// isolateNamespace runs on a fresh holder's thread, whose mount namespace
// is a copy of the daemon's (mountinfo is read for the calling thread). It detaches the copies of every LayerFS mount there —
// the FUSE mounts of Stores (this daemon's and any other's) and the
// Workspace overlays stacked on them — and covers the daemon's state
// directory with an empty read-only tmpfs. Commands run in the namespace
// then see their own Workspace and no other: not another's overlay, nor
// its upperdir on disk. And no copy here pins a filesystem: a daemon could
// not finish unmounting its FUSE mount while a copy of it lived on in some
// other daemon's holder.
func isolateNamespace(stateDir string) error {
	mounts, err := mountinfo.Read(mountinfo.Thread)
	if err != nil {
		return err
	}
	for _, m := range layerfsMounts(mounts) {
		if err := unmount(m); err != nil {
			return err
		}
	}
	if stateDir == "" {
		return nil
	}
	if err := unix.Mount("tmpfs", stateDir, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,mode=0"); err != nil {
		return fmt.Errorf("hide %s: %w", stateDir, err)
	}
	return nil
}

// layerfsMounts picks the LayerFS FUSE mounts and the overlays whose lower
// layers lie in one, deepest first.
func layerfsMounts(mounts []mountinfo.Mount) []string {
	var out []string
	for i, lfs := range layerfsFlags(mounts) {
		if lfs {
			out = append(out, mounts[i].Point)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// layerfsFlags reports, for each of mounts, whether it is a LayerFS FUSE
// mount or an overlay whose lower layers lie in one.
func layerfsFlags(mounts []mountinfo.Mount) []bool {
	var fuse []string
	for _, m := range mounts {
		if m.FSType == fsTypeLayerFS {
			fuse = append(fuse, m.Point)
		}
	}
	inFUSE := func(p string) bool {
		for _, f := range fuse {
			if p == f || strings.HasPrefix(p, f+"/") {
				return true
			}
		}
		return false
	}
	out := make([]bool, len(mounts))
	for i, m := range mounts {
		out[i] = m.FSType == fsTypeLayerFS || m.FSType == "overlay" && overlayOver(m.SuperOpts, inFUSE)
	}
	return out
}

const fsTypeLayerFS = "fuse.layerfs"

// overlayOver reports whether an overlay's lower layers include one for
// which in is true: named by lowerdir (colon-separated), or one each by
// lowerdir+, as the kernel shows an overlay mounted with data-only layers.
func overlayOver(opts []string, in func(string) bool) bool {
	for _, o := range opts {
		if l, ok := strings.CutPrefix(o, "lowerdir+="); ok && in(mountinfo.Unescape(l)) {
			return true
		}
		lower, ok := strings.CutPrefix(o, "lowerdir=")
		if !ok {
			continue
		}
		for _, l := range strings.Split(lower, ":") {
			if l != "" && in(mountinfo.Unescape(l)) {
				return true
			}
		}
	}
	return false
}
