package lowerfs

import "sync"

// Sequential reads arrive out of order: the kernel sends its read-ahead as
// many requests at once (fusefs allows 64 in flight), and they reach
// File one goroutine each. A 1 GiB read through a mount showed requests
// up to 40 MiB behind the furthest one so far, and bursts starting well
// past what read-ahead had asked for. So a read counts as sequential from
// lateSlack before the end of the furthest read to aheadSlack windows
// past what was already requested; a late read changes nothing, and one
// ahead has the gap before it fetched too. Only reads outside that range
// reset the window.
const (
	lateSlack  = 64 << 20
	aheadSlack = 2
)

// readAhead detects sequential reading of one File and sizes the window
// prefetched past it.
type readAhead struct {
	mu      sync.Mutex
	next    int64 // where the furthest read so far ended
	window  int64 // current window; 0 after a non-sequential read
	fetched int64 // chunks before this offset were already requested
}

// advance records a read of n bytes at off and returns the range whose
// chunks should be prefetched. Without read-ahead (limit 0) it is the
// read itself, so its chunks load in parallel. A sequential read tops the
// window up only once half of it has been read, so that read-ahead asks
// the Store for long runs of chunks, which it reads in one query each,
// rather than for a read's worth at a time.
func (r *readAhead) advance(off, n, limit int64) (from, to int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	end := off + n
	if off == 0 { // a reader starting over
		r.window, r.fetched, r.next = 0, 0, 0
	}
	if !r.sequential(off, limit) {
		r.window, r.fetched, r.next = 0, end, end
		return off, end
	}
	r.window = min(max(2*r.window, minReadAhead), limit)
	r.next = max(r.next, end)
	if r.fetched >= end+r.window/2 {
		return end, end // enough is on its way
	}
	from, to = r.fetched, end+r.window // from may be before off: see aheadSlack
	r.fetched = to
	return from, to
}

func (r *readAhead) sequential(off, limit int64) bool {
	if limit <= 0 {
		return false
	}
	if off == 0 {
		return true
	}
	return off >= r.next-lateSlack && off <= max(r.next, r.fetched)+aheadSlack*limit
}
