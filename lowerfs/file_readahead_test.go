package lowerfs

import "testing"

func TestReadAheadWindow(t *testing.T) {
	const limit = 2 << 20
	var r readAhead
	type step struct{ off, n, from, to int64 }
	for i, s := range []step{
		{0, 128 << 10, 0, 128<<10 + minReadAhead},                             // first read: smallest window
		{128 << 10, 128 << 10, 128<<10 + minReadAhead, 256<<10 + 512<<10},     // doubles
		{256 << 10, 128 << 10, 768 << 10, 384<<10 + 1<<20},                    // doubles again
		{384 << 10, 128 << 10, 384<<10 + 1<<20, 512<<10 + limit},              // capped at the limit
		{512 << 10, 128 << 10, 640 << 10, 640 << 10},                          // over half the window still queued: nothing
		{1 << 20, 1 << 20, 512<<10 + limit, 2<<20 + limit},                    // under half: topped up
		{1 << 20, 128 << 10, 1<<20 + 128<<10, 1<<20 + 128<<10},                // a late read changes nothing
		{7 << 20, 1 << 20, 4 << 20, 8<<20 + limit},                            // ahead of the window: the gap too
		{100 << 20, 4096, 100 << 20, 100<<20 + 4096},                          // a jump: just the read
		{100<<20 + 4096, 4096, 100<<20 + 4096, 100<<20 + 8192 + minReadAhead}, // sequential again
	} {
		from, to := r.advance(s.off, s.n, limit)
		if from != s.from || to != s.to {
			t.Errorf("step %d: read %d+%d prefetches [%d, %d), want [%d, %d)", i, s.off, s.n, from, to, s.from, s.to)
		}
	}
}

func TestReadAheadDisabled(t *testing.T) {
	var r readAhead
	for off := int64(0); off < 1<<20; off += 128 << 10 {
		if from, to := r.advance(off, 128<<10, 0); from != off || to != off+128<<10 {
			t.Fatalf("read at %d prefetches [%d, %d): want only the read itself", off, from, to)
		}
	}
}
