package publish

import (
	"errors"
	"reflect"
	"testing"

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
	}{
		{"a clone", []fiemapExtent{ext(0, 100*mib, 4*mib, fiemapExtentLast)}, 4 * mib, nil, false},
		{"one block rewritten", []fiemapExtent{
			ext(0, 100*mib, 8192, 0), ext(8192, 7*mib, 4096, 0), ext(12288, 100*mib+12288, 4*mib-12288, fiemapExtentLast),
		}, 4 * mib, []extents.Range{{Off: 8192, Len: 4096}}, false},
		{"shared blocks at another offset", []fiemapExtent{
			ext(0, 100*mib+4096, 4*mib, fiemapExtentLast),
		}, 4 * mib, nil, true},
		{"appended", []fiemapExtent{
			ext(0, 100*mib, 4*mib, 0), ext(4*mib, 9*mib, 4096, fiemapExtentLast),
		}, 4*mib + 10, []extents.Range{{Off: 4 * mib, Len: 10}}, false},
		{"delayed allocation is not proof", []fiemapExtent{
			ext(0, 100*mib, 4*mib, 0x4|fiemapExtentLast),
		}, 4 * mib, nil, true},
		{"a hole where the old file has data", []fiemapExtent{
			ext(0, 100*mib, mib, 0), ext(mib+8192, 100*mib+mib+8192, 3*mib-8192, fiemapExtentLast),
		}, 4 * mib, []extents.Range{{Off: mib, Len: 8192}}, false},
		{"truncated", []fiemapExtent{ext(0, 100*mib, mib, fiemapExtentLast)}, mib, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := sharedRanges(c.new, old, c.size, 4*mib, mib/2)
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
