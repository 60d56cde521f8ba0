package fusefs

import "github.com/layerfs/layerfs/internal/mountinfo"

// fsType is the filesystem type of every layerfs mount, as /proc/mounts
// shows it.
const fsType = "fuse.layerfs"

// mountAt returns the topmost mount at the absolute path p, if any.
func mountAt(p string) (mountinfo.Mount, bool) {
	mounts, err := mountinfo.Read(mountinfo.Self)
	if err != nil {
		return mountinfo.Mount{}, false
	}
	var top mountinfo.Mount
	found := false
	for _, m := range mounts {
		if m.Point == p {
			top, found = m, true // later lines are mounted on top
		}
	}
	return top, found
}
