package sessions

import "sync"

// holderPool keeps a few holders made ahead of need, so creating a
// Workspace does not wait for a namespace to be made and isolated (which
// copies, then detaches, every live Workspace's mount: it grows with their
// number).
type holderPool struct {
	template nsTemplate // what holders' namespaces are copies of
	size     int

	mu      sync.Mutex
	ready   []*holder
	filling bool
	closed  bool
}

func newHolderPool(hide string, size int) *holderPool {
	p := &holderPool{template: nsTemplate{hide: hide}, size: size}
	p.refill()
	return p
}

// get returns a ready holder, making one now if none is waiting.
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
	return newHolder(&p.template, false)
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
			h, err := newHolder(&p.template, true)
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
	p.template.close()
}
