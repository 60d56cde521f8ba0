package store

import (
	"bytes"
	"sync"
	"sync/atomic"

	"github.com/layerfs/layerfs/object"
)

// Stage holds new objects in memory — hashed and compressed — until they
// are written, either inside the ref transaction that publishes them
// (RefTx.Write: one transaction for a small commit) or as packs of their
// own (Flush) when there are too many to hold the write lock for. A Stage
// implements extents.Store, so file edits can build into it.
type Stage struct {
	s      *Store
	mu     sync.Mutex
	objs   map[object.ID]*pendingObject // staged, or being spilled
	order  []*pendingObject             // staged, not being spilled
	queued int                          // stored bytes of order
	bytes  int                          // stored bytes of objs
	flying map[int][]*pendingObject     // spills under way
	nextID int
	stats  BatchStats
	spills sync.WaitGroup
	// flushing: Flush waits for the spills, then writes what is staged.
	flushing bool
	// viaWriter: see ReadThroughWriter.
	viaWriter atomic.Bool
}

// ReadThroughWriter makes Get read the objects the Stage does not hold
// through the writer's connection (WriterReads) while on and that
// connection is idle, rather than a reader's, which drops its page cache
// and mapping after every commit: a capture patching a big file reads a
// few old chunks and extent nodes, and a Workspace commits often (~0.4 ms
// of a capture's 3.5 ms). While the connection is busy — a transaction,
// perhaps this Stage's own spill — Get asks a reader rather than wait.
// Never leave it on for a Stage read inside Update: there the connection
// is the transaction's, and a read that found it idle the moment before
// would wait for itself. It returns the setting it replaces.
func (st *Stage) ReadThroughWriter(on bool) bool { return st.viaWriter.Swap(on) }

// stageSpill is how many stored bytes a Stage collects before it writes
// them as a pack of its own in the background, while it goes on staging:
// a capture of big files neither holds them all in memory nor leaves all
// of their writing for after the capture. Objects stay readable through
// the Stage until written. Objects spilled for a publish that then
// conflicts stay in the Store, where a retry finds them.
//
// Smaller than a pack: what is left to write when the capture ends — the
// last spill — is what the publish waits for. Capturing a new 32 MiB file
// in a Workspace waited 57–67 ms for it with 8 MiB spills, 32–40 ms with
// 2 MiB ones; the lifecycle was faster in 5 of 6 interleaved pairs
// (median of the pairs' differences ~6 ms of ~205). It must stay above
// what publish lets ride in a ref transaction (its inlineMax, 1 MiB):
// past that, a publish flushes the Stage first.
const stageSpill = 2 << 20

// NewStage starts an empty Stage.
func (s *Store) NewStage() *Stage {
	return &Stage{s: s, objs: map[object.ID]*pendingObject{}, flying: map[int][]*pendingObject{}}
}

// Put stages an object of kind k and returns its ID. An object the Store
// already holds is not staged again. raw stays the caller's.
func (st *Stage) Put(k object.Kind, raw []byte) (object.ID, error) {
	return st.put(k, raw, object.Zero, false)
}

// PutChunk stages file bytes; base, when set, may become their delta base.
// raw becomes the Stage's (extents.Store's contract).
func (st *Stage) PutChunk(raw []byte, base object.ID) (object.ID, error) {
	return st.put(object.KindChunk, raw, base, true)
}

// PutNode stages an extent node; raw becomes the Stage's.
func (st *Stage) PutNode(raw []byte) (object.ID, error) {
	return st.put(object.KindExtent, raw, object.Zero, true)
}

// put stages raw, which it may keep when owned, else copies.
func (st *Stage) put(k object.Kind, raw []byte, base object.ID, owned bool) (object.ID, error) {
	id := object.Sum(k, raw)
	st.mu.Lock()
	_, staged := st.objs[id]
	st.mu.Unlock()
	if staged {
		return id, nil
	}
	if !st.skipHas(k, raw, base) {
		if ok, err := st.s.Has(id); err != nil || ok {
			if ok {
				st.reused()
			}
			return id, err
		}
	}
	if !owned {
		raw = bytes.Clone(raw)
	}
	st.stageNew(id, k, raw, base)
	return id, nil
}

// PutChunks stages several chunks, as PutChunk each with no base, asking
// the Store which it holds in one query per store.HasManyMax of them
// rather than one each — and not about the small ones (see skipHas) nor
// the incompressible ones: those cost nothing to encode, and inserting
// one the Store holds is a no-op counted as reused, where asking cost a
// 32 MiB file's capture ~20 ms of CPU. The chunks become the Stage's.
// They are hashed outside the Stage's lock, so callers hash in parallel.
func (st *Stage) PutChunks(chunks [][]byte) ([]object.ID, error) {
	ids := make([]object.ID, len(chunks))
	random := make([]bool, len(chunks))
	for i, raw := range chunks {
		// Sampled right after hashing, while the chunk is in the
		// core's cache: sampled after the whole run was hashed, it took
		// 3× as long (~20 ms of a new 32 MiB file's capture CPU).
		ids[i] = object.Sum(object.KindChunk, raw)
		random[i] = looksRandom(raw)
	}
	fresh := make([]bool, len(chunks))
	st.mu.Lock()
	for i, id := range ids {
		_, staged := st.objs[id]
		fresh[i] = !staged
	}
	st.mu.Unlock()
	var ask []object.ID
	var askAt []int
	for i, raw := range chunks {
		switch {
		case !fresh[i]:
		case random[i]:
			// Stored as it is, as encode would decide after sampling it
			// again (~3 µs a 16 KiB chunk).
			st.stage(&pendingObject{id: ids[i], kind: object.KindChunk, raw: raw, enc: encRaw, data: raw})
		case st.skipHas(object.KindChunk, raw, object.Zero):
			st.stageNew(ids[i], object.KindChunk, raw, object.Zero)
		default:
			ask, askAt = append(ask, ids[i]), append(askAt, i)
		}
	}
	held, err := st.s.HasMany(ask)
	if err != nil {
		return nil, err
	}
	for j, i := range askAt {
		if held[j] {
			st.reused()
			continue
		}
		st.stageNew(ids[i], object.KindChunk, chunks[i], object.Zero)
	}
	return ids, nil
}

// reused counts an object the Store held already.
func (st *Stage) reused() {
	st.mu.Lock()
	st.stats.Reused++
	st.mu.Unlock()
}

// stageNew encodes and stages an object the Store lacks, and starts a
// spill when enough is queued.
func (st *Stage) stageNew(id object.ID, k object.Kind, raw []byte, base object.ID) {
	st.stage(st.s.encode(id, k, raw, base, st.lookupPending))
}

// stage stages o, encoded, and starts a spill when enough is queued.
func (st *Stage) stage(o *pendingObject) {
	st.mu.Lock()
	if _, dup := st.objs[o.id]; !dup {
		st.objs[o.id] = o
		st.order = append(st.order, o)
		st.bytes += len(o.data)
		st.queued += len(o.data)
	}
	var spill []*pendingObject
	n := st.nextID
	if st.queued >= stageSpill {
		spill, st.order, st.queued = st.order, nil, 0
		st.flying[n] = spill
		st.nextID++
		st.spills.Add(1)
	}
	st.mu.Unlock()
	if spill != nil {
		go st.spill(n, spill)
	}
}

// spill writes objs, spill n, as a pack and forgets them. Should that
// fail, they are staged again, for Flush or a ref transaction to write.
func (st *Stage) spill(n int, objs []*pendingObject) {
	defer st.spills.Done()
	b, err := st.s.writePack(objs, func() bool { return st.spillsBesides(n) })
	st.count(b)
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, ok := st.flying[n]; !ok {
		return // taken meanwhile: a ref transaction writes them too
	}
	delete(st.flying, n)
	if err != nil {
		st.order = append(objs, st.order...)
		for _, o := range objs {
			st.queued += len(o.data)
		}
		return
	}
	for _, o := range objs {
		if st.objs[o.id] == o {
			delete(st.objs, o.id)
			st.bytes -= len(o.data)
		}
	}
}

// spilled reports whether the Stage has written packs of its own.
func (st *Stage) spilled() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.nextID > 0
}

func (st *Stage) setFlushing(on bool) {
	st.mu.Lock()
	st.flushing = on
	st.mu.Unlock()
}

// spillsBesides reports whether a pack follows spill n at once: another
// spill under way, or what Flush, waiting for them, writes next.
func (st *Stage) spillsBesides(n int) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	others := len(st.flying)
	if _, self := st.flying[n]; self {
		others--
	}
	return others > 0 || (st.flushing && len(st.order) > 0)
}

// askMax: a Stage does not ask the Store whether a chunk this small (with
// no delta base) is stored; compressing it again costs less than the
// query, and inserting it again is a no-op (ON CONFLICT DO NOTHING).
const askMax = 4 << 10

// skipHas reports whether put may stage an object without asking whether
// the Store holds it: a new tree or commit almost never is stored already,
// and a small chunk is cheaper to compress than to look up.
func (st *Stage) skipHas(k object.Kind, raw []byte, base object.ID) bool {
	switch k {
	case object.KindTree, object.KindCommit:
		return true
	case object.KindChunk:
		return len(raw) <= askMax && base.IsZero()
	}
	return false
}

func (st *Stage) lookupPending(id object.ID) (*pendingObject, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	o, ok := st.objs[id]
	return o, ok
}

// Get returns an object's bytes, staged or stored.
func (st *Stage) Get(id object.ID, k object.Kind) ([]byte, error) {
	if o, ok := st.lookupPending(id); ok {
		if o.kind != k {
			return nil, wrongKind(id, o.kind, k)
		}
		return o.raw, nil
	}
	if st.viaWriter.Load() && st.s.writerIdle() {
		return st.s.WriterReads().Get(id, k)
	}
	return st.s.Get(id, k)
}

// Staged returns an object's bytes if the Stage holds it.
func (st *Stage) Staged(id object.ID, k object.Kind) ([]byte, bool, error) {
	o, ok := st.lookupPending(id)
	if !ok {
		return nil, false, nil
	}
	if o.kind != k {
		return nil, true, wrongKind(id, o.kind, k)
	}
	return o.raw, true, nil
}

// Bytes is how many stored bytes the Stage holds.
func (st *Stage) Bytes() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.bytes
}

// Stats says what was written and reused so far.
func (st *Stage) Stats() BatchStats {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.stats
}

// take empties the Stage and returns what it held, in order, spills under
// way included: it runs inside a ref transaction, which holds the write
// lock a spill waits for, so it cannot wait for them. An object both
// write is inserted once; the other insert finds it there.
func (st *Stage) take() []*pendingObject {
	st.mu.Lock()
	defer st.mu.Unlock()
	var objs []*pendingObject
	for n := range st.nextID {
		for _, o := range st.flying[n] {
			c := *o // a copy: the spill marks its own as written
			c.written = false
			objs = append(objs, &c)
		}
	}
	objs = append(objs, st.order...)
	st.order, st.objs, st.bytes, st.queued = nil, map[object.ID]*pendingObject{}, 0, 0
	st.flying = map[int][]*pendingObject{}
	return objs
}

func (st *Stage) count(b BatchStats) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.stats.New += b.New
	st.stats.Reused += b.Reused
	st.stats.RawBytes += b.RawBytes
	st.stats.StoredBytes += b.StoredBytes
	st.stats.Packs += b.Packs
}

// Flush writes the staged objects as packs of their own, each in a short
// transaction, and empties the Stage. It waits for the spills under way
// first.
func (st *Stage) Flush() error {
	st.setFlushing(true)
	defer st.setFlushing(false)
	st.spills.Wait()
	objs := st.take()
	for len(objs) > 0 {
		n, size := 0, 0
		for n < len(objs) && size < packTarget {
			size += len(objs[n].data)
			n++
		}
		last := n == len(objs)
		b, err := st.s.writePack(objs[:n], func() bool { return !last })
		st.count(b)
		if err != nil {
			return err
		}
		objs = objs[n:]
	}
	return nil
}

// Write adds the staged objects to the transaction's pack and empties the
// Stage: they land atomically with the refs the transaction moves.
func (t *RefTx) Write(st *Stage) {
	objs := st.take()
	t.objs = append(t.objs, objs...)
	t.stages = append(t.stages, stageCount{st, objs})
}

type stageCount struct {
	st   *Stage
	objs []*pendingObject
}
