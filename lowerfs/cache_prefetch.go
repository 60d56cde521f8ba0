package lowerfs

import (
	"sync"

	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// Read-ahead requests are batches of up to prefetchBatch chunks, read in
// one Store call (store.GetManyMax: a Store reads a run of that many
// chunks in one query); prefetchQueue bounds the batches waiting for a
// worker (about 64 MiB of average chunks). A full queue makes the reader
// that asks for more wait.
const (
	prefetchBatch = store.GetManyMax
	prefetchQueue = 64
)

// prefetcher loads objects into a Cache in the background.
type prefetcher struct {
	c    *Cache
	jobs chan prefetchJob

	mu     sync.Mutex // held while sending, so close never closes jobs under a sender
	closed bool
	wg     sync.WaitGroup
}

// prefetchJob is a batch of claimed loads: readers that need one of them
// wait for the worker instead of loading it again.
type prefetchJob struct {
	g     *getter
	ids   []object.ID
	loads map[object.ID]*cacheLoad
	k     object.Kind
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
		p.c.stats.prefetched.Add(int64(j.g.loadClaimed(j.ids, j.loads, j.k)))
	}
}

// add claims those of ids that are neither cached nor loading and queues
// their load, waiting while the queue is full.
func (p *prefetcher) add(g *getter, ids []object.ID, k object.Kind) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	if todo, loads := p.c.claim(ids); len(todo) > 0 {
		p.jobs <- prefetchJob{g: g, ids: todo, loads: loads, k: k}
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
