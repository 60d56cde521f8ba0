package store

import (
	"bytes"
	"context"
	"database/sql"
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
	id      object.ID
	kind    object.Kind
	raw     []byte
	enc     int
	data    []byte
	base    object.ID
	depth   int
	written bool // set by a RefTx that inserted it
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

// Put stores an object of kind k and returns its ID. raw stays the
// caller's.
func (b *Batch) Put(k object.Kind, raw []byte) (object.ID, error) {
	return b.put(k, raw, object.Zero, false)
}

// PutChunk stores file bytes; base, when set, is the chunk they replace and
// may become their delta base. raw becomes the Batch's (extents.Store's
// contract).
func (b *Batch) PutChunk(raw []byte, base object.ID) (object.ID, error) {
	return b.put(object.KindChunk, raw, base, true)
}

// PutNode stores an extent node; raw becomes the Batch's.
func (b *Batch) PutNode(raw []byte) (object.ID, error) {
	return b.put(object.KindExtent, raw, object.Zero, true)
}

// put stores raw, which it may keep when owned, else copies.
func (b *Batch) put(k object.Kind, raw []byte, base object.ID, owned bool) (object.ID, error) {
	id := object.Sum(k, raw)
	if known, err := b.known(id); known || err != nil {
		return id, err
	}
	if !owned {
		raw = bytes.Clone(raw)
	}
	return id, b.enqueue(b.s.encode(id, k, raw, base, b.lookupPending))
}

func (b *Batch) lookupPending(id object.ID) (*pendingObject, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	o, ok := b.pending[id]
	return o, ok
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

// encode compresses a new object, as a delta against base when base is set,
// is a chunk, and the delta is smaller. pending finds objects not yet
// written. The object keeps raw.
func (s *Store) encode(id object.ID, k object.Kind, raw []byte, base object.ID, pending func(object.ID) (*pendingObject, bool)) *pendingObject {
	o := &pendingObject{id: id, kind: k, raw: raw}
	o.enc, o.data = s.codec.compress(o.raw, k)
	if base.IsZero() || k != object.KindChunk {
		return o
	}
	baseRaw, depth, ok := s.deltaBase(base, pending)
	if !ok || depth >= maxDeltaDepth {
		return o
	}
	if d, err := s.codec.delta(o.raw, baseRaw); err == nil && len(d) < len(o.data) {
		o.enc, o.data, o.base, o.depth = encDelta, d, base, depth+1
	}
	return o
}

func (s *Store) deltaBase(base object.ID, pending func(object.ID) (*pendingObject, bool)) ([]byte, int, bool) {
	if p, ok := pending(base); ok {
		return p.raw, p.depth, p.kind == object.KindChunk
	}
	depth, ok := s.objectDepth(context.Background(), base)
	if !ok {
		return nil, 0, false
	}
	raw, err := s.Get(base, object.KindChunk)
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
	p, ok := b.lookupPending(id)
	if !ok {
		return b.s.Get(id, k)
	}
	if p.kind != k {
		return nil, wrongKind(id, p.kind, k)
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
		st, err := b.s.writePack(objs, func() bool { return len(b.packs) > 0 })
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
// more, asked once it is written, says whether another pack follows at
// once: then the writer keeps its page cache for it (see wrote).
func (s *Store) writePack(objs []*pendingObject, more func() bool) (BatchStats, error) {
	if err := s.writable(); err != nil {
		return BatchStats{}, err
	}
	ctx := context.Background()
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return BatchStats{}, fmt.Errorf("write pack: %w", err)
	}
	defer tx.Rollback()
	st, err := s.insertPack(ctx, tx, objs, time.Now().UnixNano())
	if err != nil || st.New == 0 {
		return st, err // nothing new: the empty pack rolls back
	}
	if err := tx.Commit(); err != nil {
		return BatchStats{}, fmt.Errorf("write pack: %w", err)
	}
	s.rememberExtents(objs)
	s.wrote(st.StoredBytes, more())
	return st, nil
}

// wrote follows a committed write transaction that stored about n bytes:
// it tells the checkpointer, and hands back the pages a large one kept in
// the writer's page cache (see cacheSpillPages) — SQLite keeps them,
// clean, after the commit, and every later commit would walk them. When
// more packs follow at once (more), the last one hands them back: the
// next pack reuses their memory, where one that starts from an empty
// cache faults every page in afresh — a quarter of a 32 MiB file's
// insert time went there.
func (s *Store) wrote(n int64, more bool) {
	s.ckpt.wrote(n)
	if n > writerCacheBytes && !more {
		s.w.ExecContext(context.Background(), `PRAGMA shrink_memory`)
	}
}

// insertPack inserts objs as one pack within tx and seals it. Objects
// another writer stored first are skipped and counted as reused.
func (s *Store) insertPack(ctx context.Context, tx *sql.Tx, objs []*pendingObject, now int64) (BatchStats, error) {
	var st BatchStats
	res, err := stmt(ctx, tx, s.wstmts.insertPack).ExecContext(ctx, now)
	if err != nil {
		return st, fmt.Errorf("write pack: %w", err)
	}
	pack, _ := res.LastInsertId()
	ins := stmt(ctx, tx, s.wstmts.insertObject)
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
			st.Reused++
			continue
		}
		o.written = true
		st.New++
		st.RawBytes += int64(len(o.raw))
		st.StoredBytes += int64(len(o.data))
	}
	if st.New == 0 {
		return st, nil
	}
	if _, err := stmt(ctx, tx, s.wstmts.sealPack).ExecContext(ctx, st.New, st.RawBytes, st.StoredBytes, pack); err != nil {
		return st, fmt.Errorf("seal pack: %w", err)
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
