package sessions

import (
	"reflect"
	"testing"

	"github.com/layerfs/layerfs/internal/mountinfo"
)

// TestLayerFSMountsFindsOverlays: the mounts a new holder namespace must
// drop are the Store's FUSE mounts and every overlay stacked on one,
// whether its lower layers are one lowerdir= list or lowerdir+= options
// (an overlay with a data-only layer), and nothing else.
func TestLayerFSMountsFindsOverlays(t *testing.T) {
	lines := []string{
		"40 30 0:40 / /s/lower ro,nosuid,nodev - fuse.layerfs /s/store.layerfs ro,user_id=0",
		"41 30 0:41 / /s/mnt/ws-a rw - overlay none rw,lowerdir=/other:/s/lower/c1,upperdir=/s/ws/a/upper-0,workdir=/s/ws/a/work-0",
		"42 30 0:42 / /s/mnt/ws-b rw - overlay none rw,lowerdir+=/s/lower/c2,datadir+=/s/ws/.data,upperdir=/s/ws/b/upper-0,workdir=/s/ws/b/work-0,metacopy=on",
		"43 30 0:43 / /elsewhere rw - overlay none rw,lowerdir+=/srv/base,datadir+=/s/lower/c3,upperdir=/u,workdir=/w",
		"44 30 0:44 / /s/ws rw - xfs /dev/loop0 rw",
	}
	got := layerfsMounts(parseMounts(t, lines...))
	want := []string{"/s/mnt/ws-a", "/s/mnt/ws-b", "/s/lower"} // deepest first
	if !reflect.DeepEqual(got, want) {
		t.Errorf("layerfsMounts = %q, want %q", got, want)
	}
}

// TestHostMountsKey: the template namespace is made again when the
// daemon's mounts other than LayerFS's change — one mounted, unmounted,
// remounted or moved — and not when a Workspace's overlay or a FUSE mount comes or
// goes.
func TestHostMountsKey(t *testing.T) {
	parse := func(lines ...string) []mountinfo.Mount { return parseMounts(t, lines...) }
	root := "1 0 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw"
	vol := "44 1 0:44 / /s/ws rw - xfs /dev/loop0 rw"
	fuse := "40 1 0:40 / /s/lower ro,nosuid,nodev - fuse.layerfs /s/store.layerfs ro,user_id=0"
	ws := "42 1 0:42 / /s/mnt/ws-b rw - overlay none rw,lowerdir+=/s/lower/c2,upperdir=/s/ws/b/upper-0,workdir=/s/ws/b/work-0"
	base := hostMounts(parse(root, vol, fuse))
	if got := hostMounts(parse(root, vol, fuse, ws)); got != base {
		t.Errorf("a Workspace's overlay changed the key:\n%s\nagainst\n%s", got, base)
	}
	if got := hostMounts(parse(root, vol)); got != base {
		t.Errorf("the FUSE mount's going changed the key")
	}
	for name, mounts := range map[string][]mountinfo.Mount{
		"a mount added":        parse(root, vol, fuse, "50 1 0:50 / /data rw - tmpfs tmpfs rw"),
		"a mount gone":         parse(root, fuse),
		"a mount remounted":    parse("1 0 8:1 / / ro,relatime shared:1 - ext4 /dev/sda1 rw", vol, fuse),
		"its superblock":       parse("1 0 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 ro", vol, fuse),
		"mounted again":        parse(root, "45 1 0:44 / /s/ws rw - xfs /dev/loop0 rw", fuse),
		"moved (mount --move)": parse(root, "44 1 0:44 / /s/ws2 rw - xfs /dev/loop0 rw", fuse),
	} {
		if hostMounts(mounts) == base {
			t.Errorf("%s: key unchanged", name)
		}
	}
}

// parseMounts parses mountinfo lines.
func parseMounts(t *testing.T, lines ...string) []mountinfo.Mount {
	t.Helper()
	var mounts []mountinfo.Mount
	for _, l := range lines {
		m, ok := mountinfo.Parse(l)
		if !ok {
			t.Fatalf("parse %q", l)
		}
		mounts = append(mounts, m)
	}
	return mounts
}
