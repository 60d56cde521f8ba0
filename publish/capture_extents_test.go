package publish

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/extents"
)

func TestSharedRanges(t *testing.T) {
	const mib = 1 << 20
	ext := func(logical, physical, length uint64, flags uint32) fiemapExtent {
		return fiemapExtent{Logical: logical, Physical: physical, Length: length, Flags: flags}
	}
	// The old file: 4 MiB in one extent at disk address 100 MiB.
	old := []fiemapExtent{ext(0, 100*mib, 4*mib, fiemapExtentLast)}
	cases := []struct {
		name      string
		new       []fiemapExtent
		size      int64
		want      []extents.Range
		different bool
		dirty     []int64
	}{
		{"a clone", []fiemapExtent{ext(0, 100*mib, 4*mib, fiemapExtentLast)}, 4 * mib, nil, false, nil},
		{"one block rewritten", []fiemapExtent{
			ext(0, 100*mib, 8192, 0), ext(8192, 7*mib, 4096, 0), ext(12288, 100*mib+12288, 4*mib-12288, fiemapExtentLast),
		}, 4 * mib, []extents.Range{{Off: 8192, Len: 4096}}, false, nil},
		{"shared blocks at another offset", []fiemapExtent{
			ext(0, 100*mib+4096, 4*mib, fiemapExtentLast),
		}, 4 * mib, nil, true, nil},
		{"appended", []fiemapExtent{
			ext(0, 100*mib, 4*mib, 0), ext(4*mib, 9*mib, 4096, fiemapExtentLast),
		}, 4*mib + 10, []extents.Range{{Off: 4 * mib, Len: 10}}, false, nil},
		{"delayed allocation is not proof", []fiemapExtent{
			ext(0, 100*mib, 4*mib, 0x4|fiemapExtentLast),
		}, 4 * mib, nil, true, nil},
		{"a hole where the old file has data", []fiemapExtent{
			ext(0, 100*mib, mib, 0), ext(mib+8192, 100*mib+mib+8192, 3*mib-8192, fiemapExtentLast),
		}, 4 * mib, []extents.Range{{Off: mib, Len: 8192}}, false, nil},
		{"truncated", []fiemapExtent{ext(0, 100*mib, mib, fiemapExtentLast)}, mib, nil, false, nil},
		{"dirty pages the map does not show yet", []fiemapExtent{ext(0, 100*mib, 4*mib, fiemapExtentLast)},
			4 * mib, []extents.Range{{Off: 8192, Len: 4096}, {Off: 2 * mib, Len: 4096}}, false, []int64{8192, 2 * mib}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := sharedRanges(c.new, old, c.size, 4*mib, mib/2, c.dirty)
			if c.different {
				if !errors.Is(err, extents.ErrTooDifferent) {
					t.Fatalf("got %v, %v; want ErrTooDifferent", got, err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %v, %v; want %v", got, err, c.want)
			}
		})
	}
}

// TestDirtyPages: the pages a write leaves dirty are found, and none in a
// file written back. (The page cache keeps a file in folios of up to a
// few MiB, dirty as a whole: more than the pages written may be found,
// as writeback would also move all of them.)
func TestDirtyPages(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	got, err := dirtyPages(f, 1<<20, 1<<20)
	if errors.Is(err, unix.ENOSYS) {
		t.Skip("no cachestat(2) here")
	}
	if err != nil || len(got) != 0 {
		t.Fatalf("a file written back: %v, %v", got, err)
	}
	if _, err := f.WriteAt([]byte("0123456789"), 300000); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("straddles"), 3*4096-4); err != nil {
		t.Fatal(err)
	}
	got, err = dirtyPages(f, 1<<20, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []int64{2 * 4096, 3 * 4096, 300000 / 4096 * 4096} {
		if !slices.Contains(got, want) {
			t.Errorf("the page at %d, written, is not found dirty (found %d pages)", want, len(got))
		}
	}
	if _, err := dirtyPages(f, 1<<20, 4096); !errors.Is(err, extents.ErrTooDifferent) {
		t.Errorf("more dirty than the limit: %v, want ErrTooDifferent", err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if got, err := dirtyPages(f, 1<<20, 1<<20); err != nil || len(got) != 0 {
		t.Fatalf("written back again: %d pages, %v", len(got), err)
	}
}
