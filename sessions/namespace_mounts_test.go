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
	var mounts []mountinfo.Mount
	for _, l := range lines {
		m, ok := mountinfo.Parse(l)
		if !ok {
			t.Fatalf("parse %q", l)
		}
		mounts = append(mounts, m)
	}
	got := layerfsMounts(mounts)
	want := []string{"/s/mnt/ws-a", "/s/mnt/ws-b", "/s/lower"} // deepest first
	if !reflect.DeepEqual(got, want) {
		t.Errorf("layerfsMounts = %q, want %q", got, want)
	}
}
