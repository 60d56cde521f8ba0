package mountinfo

import (
	"slices"
	"testing"
)

func TestParse(t *testing.T) {
	line := `612 27 0:61 / /var/tmp/my\040mnt ro,nosuid,nodev,relatime shared:300 - fuse.layerfs /s/p.layerfs\043main ro,user_id=0,group_id=0`
	m, ok := Parse(line)
	if !ok || m.ID != "612" || m.Opts != "ro,nosuid,nodev,relatime" || m.Point != "/var/tmp/my mnt" || m.FSType != "fuse.layerfs" || m.Source != "/s/p.layerfs#main" ||
		!slices.Equal(m.SuperOpts, []string{"ro", "user_id=0", "group_id=0"}) {
		t.Errorf("got %+v, %v", m, ok)
	}
	for _, bad := range []string{"garbage", "1 2 3:4 / /p rw", "1 2 3:4 / - overlay", "1 2 3:4 / /p - overlay none rw"} {
		if _, ok := Parse(bad); ok {
			t.Errorf("parsed %q", bad)
		}
	}
}

func TestUnder(t *testing.T) {
	mounts := []Mount{{Point: "/s"}, {Point: "/s/a"}, {Point: "/sx"}, {Point: "/s/a/b"}, {Point: "/t"}, {Point: "/s/c"}}
	got := Under(mounts, "/s")
	if want := []string{"/s/a/b", "/s/a", "/s/c", "/s"}; !slices.Equal(got, want) {
		t.Errorf("Under(/s) = %v, want %v", got, want)
	}
}

func TestReadSelf(t *testing.T) {
	mounts, err := Read(Self)
	if err != nil {
		t.Skip("no mountinfo here:", err)
	}
	if !slices.ContainsFunc(mounts, func(m Mount) bool { return m.Point == "/" }) {
		t.Errorf("no mount at / in %d mounts", len(mounts))
	}
}
