package lowerfs

import (
	"sync"

	"github.com/layerfs/layerfs/object"
)

// prefetchQueue bounds the read-ahead requests waiting for a worker: about
// 16 MiB of average chunks.
const prefetchQueue = 1024

// prefetcher loads objects into a Cache in the background.
type prefetcher struct {
	c    *Cache
	jobs chan prefetchJob

	mu     sync.Mutex // guards closed against sends on a closed channel
	closed bool
	wg     sync.WaitGroup
}

type prefetchJob struct {
	g  *getter
	id object.ID
	k  object.Kind
}

func newPrefetcher(c *Cache, workers int) *prefetcher {
	p := &prefetcher{c: c, jobs: make(chan prefetchJob, prefetchQueue)}
	for i := 0; i < max(workers, 1); i++ {
		p.wg.Add(1)
		go p.work()
	}
	return p
}

func (p *prefetcher) work() {
	defer p.wg.Done()
	for j := range p.jobs {
		if p.c.has(j.id) {
			continue
		}
		// Errors are not cached: the reader meets them again and reports
		// them with its path.
		if _, err := j.g.Get(j.id, j.k); err == nil {
			p.c.stats.prefetched.Add(1)
		}
	}
}

// add queues a load unless the object is already cached or loading. It
// never blocks: on a full queue the request is dropped.
func (p *prefetcher) add(g *getter, id object.ID, k object.Kind) {
	if p.c.has(id) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	select {
	case p.jobs <- prefetchJob{g: g, id: id, k: k}:
	default:
		p.c.stats.dropped.Add(1)
	}
}

func (p *prefetcher) close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.jobs)
	}
	p.mu.Unlock()
	p.wg.Wait()
}
