package sessions

import "sync"

// holderPool keeps a few namespace holders started ahead of need, their
// mount namespaces already joined, so creating a Workspace waits neither
// for a process to start nor for setns. Holders are stopped through it
// too: stopping one does not wait for it to exit, but closing the pool
// waits for every holder stopped so far.
type holderPool struct {
	self string
	hide string // the state directory holders hide
	size int

	mu       sync.Mutex
	ready    []*holder
	filling  bool
	closed   bool
	stopping []*holder // stopped, maybe not yet exited
}

func newHolderPool(self, hide string, size int) *holderPool {
	p := &holderPool{self: self, hide: hide, size: size}
	p.refill()
	return p
}

// get returns a ready holder, starting one now if none is waiting.
func (p *holderPool) get() (*holder, error) {
	p.mu.Lock()
	var h *holder
	if n := len(p.ready); n > 0 {
		h, p.ready = p.ready[n-1], p.ready[:n-1]
	}
	p.mu.Unlock()
	p.refill()
	if h != nil {
		return h, nil
	}
	return startHolder(p.self, p.hide)
}

// refill tops the pool up in the background.
func (p *holderPool) refill() {
	p.mu.Lock()
	if p.filling || p.closed || len(p.ready) >= p.size {
		p.mu.Unlock()
		return
	}
	p.filling = true
	p.mu.Unlock()
	go func() {
		for {
			p.mu.Lock()
			if p.closed || len(p.ready) >= p.size {
				p.filling = false
				p.mu.Unlock()
				return
			}
			p.mu.Unlock()
			h, err := startHolder(p.self, p.hide)
			p.mu.Lock()
			if err != nil || p.closed {
				p.filling = false
				p.mu.Unlock()
				if h != nil {
					p.stop(h)
				}
				return
			}
			p.ready = append(p.ready, h)
			p.mu.Unlock()
		}
	}()
}

// stop ends a holder the pool handed out (or made) without waiting for
// it to exit.
func (p *holderPool) stop(h *holder) {
	h.stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	live := p.stopping[:0]
	for _, s := range p.stopping {
		select {
		case <-s.exited:
		default:
			live = append(live, s)
		}
	}
	p.stopping = append(live, h)
}

// close stops the ready holders and waits until every holder stopped
// through the pool has exited, so no namespace of theirs still holds a
// Workspace's overlay (which would keep the Store's FUSE mount alive).
func (p *holderPool) close() {
	p.mu.Lock()
	p.closed = true
	ready := p.ready
	p.ready = nil
	p.mu.Unlock()
	for _, h := range ready {
		p.stop(h)
	}
	p.mu.Lock()
	stopping := p.stopping
	p.stopping = nil
	p.mu.Unlock()
	for _, h := range stopping {
		<-h.exited
	}
}
