package fusefs

import "testing"

func TestParseMountinfo(t *testing.T) {
	line := `612 27 0:61 / /var/tmp/my\040mnt ro,nosuid,nodev,relatime shared:300 - fuse.layerfs /s/p.layerfs\043main ro,user_id=0,group_id=0,default_permissions`
	m, ok := parseMountinfo(line)
	if !ok || m.Point != "/var/tmp/my mnt" || m.FSType != fsType || m.Source != "/s/p.layerfs#main" {
		t.Errorf("got %+v, %v", m, ok)
	}
	if _, ok := parseMountinfo("garbage"); ok {
		t.Error("parsed garbage")
	}
}
