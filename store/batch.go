package store

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/layerfs/layerfs/object"
)

// packTarget is how many stored bytes a pack collects before it is written:
// large enough to amortise a transaction, small enough that the write lock is
// held only briefly.
const packTarget = 8 << 20

// Batch collects new objects and writes them in packs. Put hashes and
// compresses in the caller's goroutine, so callers on several goroutines
// compress in parallel; full packs are written by a background goroutine
// while Puts continue. Objects are readable through the Batch (Get) as soon
// as Put returns, and through the Store once Flush returns.
type Batch struct {
	s       *Store
	mu      sync.Mutex
	pending map[object.ID]*pendingObject
	queue   []*pendingObject
	queued  int
	stats   BatchStats
	packs   chan []*pendingObject
	done    chan struct{}
	err     error // first write error; sticky
}

// BatchStats counts what a Batch did, for receipts and progress.
type BatchStats struct {
	New, Reused int   // objects written, objects already present
	RawBytes    int64 // canonical bytes of new objects
	StoredBytes int64 // their stored (compressed) bytes
	Packs       int
}

type pendingObject struct {
	id    object.ID
	kind  object.Kind
	raw   []byte
	enc   int
	data  []byte
	base  object.ID
	depth int
}

// NewBatch starts a Batch. Call Flush to write it; a Batch that is not
// flushed writes nothing more than the packs it already filled.
func (s *Store) NewBatch() *Batch {
	b := &Batch{
		s:       s,
		pending: map[object.ID]*pendingObject{},
		packs:   make(chan []*pendingObject, 1),
		done:    make(chan struct{}),
	}
	go b.writer()
	return b
}

// Put stores an object of kind k and returns its ID.
func (b *Batch) Put(k object.Kind, raw []byte) (object.ID, error) {
	return b.put(k, raw, object.Zero)
}

// PutChunk stores file bytes; base, when set, is the chunk they replace and
// may become their delta base.
func (b *Batch) PutChunk(raw []byte, base object.ID) (object.ID, error) {
	return b.put(object.KindChunk, raw, base)
}

// PutNode stores an extent node.
func (b *Batch) PutNode(raw []byte) (object.ID, error) {
	return b.put(object.KindExtent, raw, object.Zero)
}

func (b *Batch) put(k object.Kind, raw []byte, base object.ID) (object.ID, error) {
	id := object.Sum(k, raw)
	if known, err := b.known(id); known || err != nil {
		return id, err
	}
	o := &pendingObject{id: id, kind: k, raw: append([]byte(nil), raw...)}
	o.enc, o.data = b.s.codec.compress(o.raw)
	if !base.IsZero() {
		b.tryDelta(o, base)
	}
	return id, b.enqueue(o)
}

// known reports whether id is pending or stored, counting it as reused.
func (b *Batch) known(id object.ID) (bool, error) {
	b.mu.Lock()
	_, ok := b.pending[id]
	err := b.err
	b.mu.Unlock()
	if err != nil {
		return false, err
	}
	if !ok {
		var herr error
		if ok, herr = b.s.Has(id); herr != nil {
			return false, herr
		}
	}
	if ok {
		b.mu.Lock()
		b.stats.Reused++
		b.mu.Unlock()
	}
	return ok, nil
}

// tryDelta keeps o as a delta against base when that is smaller.
func (b *Batch) tryDelta(o *pendingObject, base object.ID) {
	baseRaw, depth, ok := b.deltaBase(base)
	if !ok || depth >= maxDeltaDepth {
		return
	}
	d, err := b.s.codec.delta(o.raw, baseRaw)
	if err != nil || len(d) >= len(o.data) {
		return
	}
	o.enc, o.data, o.base, o.depth = encDelta, d, base, depth+1
}

func (b *Batch) deltaBase(base object.ID) ([]byte, int, bool) {
	b.mu.Lock()
	p, ok := b.pending[base]
	b.mu.Unlock()
	if ok {
		return p.raw, p.depth, p.kind == object.KindChunk
	}
	depth, ok := b.s.objectDepth(context.Background(), base)
	if !ok {
		return nil, 0, false
	}
	raw, err := b.s.Get(base, object.KindChunk)
	return raw, depth, err == nil
}

func (b *Batch) enqueue(o *pendingObject) error {
	b.mu.Lock()
	if _, dup := b.pending[o.id]; dup {
		b.stats.Reused++
		b.mu.Unlock()
		return nil
	}
	b.pending[o.id] = o
	b.queue = append(b.queue, o)
	b.queued += len(o.data)
	var full []*pendingObject
	if b.queued >= packTarget {
		full, b.queue, b.queued = b.queue, nil, 0
	}
	b.mu.Unlock()
	if full != nil {
		b.packs <- full // blocks while the writer is busy: backpressure
	}
	return nil
}

// Get returns an object's bytes, whether still pending or stored.
func (b *Batch) Get(id object.ID, k object.Kind) ([]byte, error) {
	b.mu.Lock()
	p, ok := b.pending[id]
	b.mu.Unlock()
	if !ok {
		return b.s.Get(id, k)
	}
	if p.kind != k {
		return nil, fmt.Errorf("object %s is a %s, want a %s: %w", id.Short(), p.kind, k, ErrCorrupt)
	}
	return p.raw, nil
}

// Flush writes every pending object and waits until they are stored. The
// Batch cannot be used afterwards.
func (b *Batch) Flush() error {
	b.mu.Lock()
	rest := b.queue
	b.queue, b.queued = nil, 0
	b.mu.Unlock()
	if len(rest) > 0 {
		b.packs <- rest
	}
	close(b.packs)
	<-b.done
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// Stats returns what the Batch has done so far.
func (b *Batch) Stats() BatchStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stats
}

func (b *Batch) writer() {
	defer close(b.done)
	for objs := range b.packs {
		st, err := b.s.writePack(objs)
		b.mu.Lock()
		if err != nil && b.err == nil {
			b.err = err
		}
		b.stats.New += st.New
		b.stats.Reused += st.Reused
		b.stats.RawBytes += st.RawBytes
		b.stats.StoredBytes += st.StoredBytes
		b.stats.Packs += st.Packs
		for _, o := range objs {
			delete(b.pending, o.id)
		}
		b.mu.Unlock()
	}
}

// writePack writes objs as one sealed pack in one short transaction.
func (s *Store) writePack(objs []*pendingObject) (BatchStats, error) {
	var st BatchStats
	if err := s.writable(); err != nil {
		return st, err
	}
	ctx := context.Background()
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return st, fmt.Errorf("write pack: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `INSERT INTO packs(created) VALUES(?)`, time.Now().UnixNano())
	if err != nil {
		return st, fmt.Errorf("write pack: %w", err)
	}
	pack, _ := res.LastInsertId()
	ins, err := tx.PrepareContext(ctx, `INSERT INTO objects(id, kind, size, enc, base, depth, pack, data) VALUES(?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO NOTHING`)
	if err != nil {
		return st, fmt.Errorf("write pack: %w", err)
	}
	defer ins.Close()
	for _, o := range objs {
		var base []byte
		if o.enc == encDelta {
			base = o.base[:]
		}
		res, err := ins.ExecContext(ctx, o.id[:], o.kind, len(o.raw), o.enc, base, o.depth, pack, nonNil(o.data))
		if err != nil {
			return st, fmt.Errorf("write pack: object %s: %w", o.id.Short(), err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			st.Reused++ // another writer stored it first
			continue
		}
		st.New++
		st.RawBytes += int64(len(o.raw))
		st.StoredBytes += int64(len(o.data))
	}
	if st.New == 0 {
		return st, nil // nothing new: roll the empty pack back
	}
	if _, err := tx.ExecContext(ctx, `UPDATE packs SET sealed = 1, objects = ?, raw_bytes = ?, stored_bytes = ? WHERE id = ?`,
		st.New, st.RawBytes, st.StoredBytes, pack); err != nil {
		return st, fmt.Errorf("seal pack: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return st, fmt.Errorf("write pack: %w", err)
	}
	st.Packs = 1
	return st, nil
}

// nonNil keeps empty objects (the empty file's chunk) from being written as
// NULL, which the schema refuses.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
