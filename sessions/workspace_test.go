package sessions

import (
	"os"
	"testing"
)

func TestDirEmpty(t *testing.T) {
	dir := t.TempDir()
	if empty, err := dirEmpty(dir); err != nil || !empty {
		t.Errorf("an empty directory: %v, %v", empty, err)
	}
	if err := os.WriteFile(dir+"/.wh.x", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if empty, err := dirEmpty(dir); err != nil || empty {
		t.Errorf("a directory with an entry: %v, %v", empty, err)
	}
	if _, err := dirEmpty(dir + "/missing"); err == nil {
		t.Error("a missing directory: no error")
	}
}
