package sessions

import "sync"

// holderPool keeps a few namespace holders started ahead of need, so
// creating a Workspace does not wait for a process to start.
type holderPool struct {
	self string
	hide string // the state directory holders hide
	size int

	mu      sync.Mutex
	ready   []*holder
	filling bool
	closed  bool
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
					h.stop()
				}
				return
			}
			p.ready = append(p.ready, h)
			p.mu.Unlock()
		}
	}()
}

func (p *holderPool) close() {
	p.mu.Lock()
	p.closed = true
	ready := p.ready
	p.ready = nil
	p.mu.Unlock()
	for _, h := range ready {
		h.stop()
	}
}
