package publish

import (
	"bytes"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
)

// TestLaterCheck: a data file made after capture is kept only if it holds
// what capture stored. Here the "clone" is a copy, sharing no block with
// the old version's data file, so every byte must be among those capture
// read, and equal to them.
func TestLaterCheck(t *testing.T) {
	dir := t.TempDir()
	const size = 256 << 10
	old := make([]byte, size)
	rand.New(rand.NewSource(1)).Read(old)
	base := filepath.Join(dir, "base")
	if err := os.WriteFile(base, old, 0o600); err != nil {
		t.Fatal(err)
	}
	content := bytes.Clone(old)
	copy(content[1000:], "edit")
	write := func(data []byte) string {
		p := filepath.Join(dir, "clone")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	whole := []readRange{{0, content[:size/2]}, {size / 2, content[size/2:]}}
	half := []readRange{{0, content[:size/2]}}
	changed := bytes.Clone(content)
	changed[size-1] ^= 1
	cases := []struct {
		name  string
		clone []byte
		reads []readRange
		ok    bool
	}{
		{"what capture read", content, whole, true},
		{"written after capture", changed, whole, false},
		{"a block capture did not read", content, half, false},
		{"another size", content[:size-4096], whole, false},
	}
	for _, c := range cases {
		l := &later{size: size, base: base, baseSize: size, reads: c.reads}
		err := l.check(write(c.clone))
		if errors.Is(err, errNoExtents) {
			t.Skipf("no block maps here: %v", err)
		}
		if c.ok && err != nil {
			t.Errorf("%s: %v; want it kept", c.name, err)
		}
		if !c.ok && !errors.Is(err, errCloneDiffers) {
			t.Errorf("%s: %v; want %v", c.name, err, errCloneDiffers)
		}
	}
}
