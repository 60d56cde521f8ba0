package extents

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/layerfs/layerfs/object"
)

// MemStore is an in-memory Store for tests. It counts what it is asked to
// store and fetch, records the base hint of every chunk, and can be told to
// fail or to corrupt an object. It is safe for concurrent use.
type MemStore struct {
	mu        sync.Mutex
	objects   map[object.ID]memObject
	bases     map[object.ID]object.ID
	corrupted map[object.ID]bool
	stats     MemStats
	failPuts  int // puts left before they fail; negative never fails
	failGets  int
}

type memObject struct {
	kind object.Kind
	data []byte
}

// MemStats counts a MemStore's objects and calls.
type MemStats struct {
	Objects  int   // objects held
	Bytes    int64 // bytes held
	Puts     int   // PutChunk and PutNode calls
	PutBytes int64 // bytes passed to them, stored or already there
	NewBytes int64 // bytes they stored that were not there before
	Gets     int   // Get calls of either kind
	NodeGets int   // Get calls for a KindExtent object
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore {
	return &MemStore{
		objects:   make(map[object.ID]memObject),
		bases:     make(map[object.ID]object.ID),
		corrupted: make(map[object.ID]bool),
		failPuts:  -1,
		failGets:  -1,
	}
}

// NewTestStore returns an empty MemStore whose consistency is checked when
// the test ends.
func NewTestStore(t testing.TB) *MemStore {
	t.Helper()
	s := NewMemStore()
	t.Cleanup(func() {
		if err := s.Verify(); err != nil {
			t.Errorf("mem store: %v", err)
		}
	})
	return s
}

// MustWrite writes b to s with WriteBytes and checks the result with Check.
func MustWrite(t testing.TB, s Store, b []byte) File {
	t.Helper()
	f, err := WriteBytes(s, b)
	if err != nil {
		t.Fatalf("write %d bytes: %v", len(b), err)
	}
	if err := Check(s, f); err != nil {
		t.Fatalf("check written file of %d bytes: %v", len(b), err)
	}
	return f
}

// PutChunk implements Store.
func (s *MemStore) PutChunk(data []byte, base object.ID) (object.ID, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, err := s.putLocked(object.KindChunk, data)
	if err == nil {
		s.bases[id] = base
	}
	return id, err
}

// PutNode implements Store.
func (s *MemStore) PutNode(data []byte) (object.ID, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.putLocked(object.KindExtent, data)
}

func (s *MemStore) putLocked(k object.Kind, data []byte) (object.ID, error) {
	if s.failPuts == 0 {
		return object.Zero, fmt.Errorf("put %s: %w", k, ErrInjected)
	}
	if s.failPuts > 0 {
		s.failPuts--
	}
	id := object.Sum(k, data)
	s.stats.Puts++
	s.stats.PutBytes += int64(len(data))
	if _, ok := s.objects[id]; !ok {
		s.objects[id] = memObject{kind: k, data: bytes.Clone(data)}
		s.stats.Objects++
		s.stats.Bytes += int64(len(data))
		s.stats.NewBytes += int64(len(data))
	}
	return id, nil
}

// Get implements Store.
func (s *MemStore) Get(id object.ID, k object.Kind) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Gets++
	if k == object.KindExtent {
		s.stats.NodeGets++
	}
	if s.failGets == 0 {
		return nil, fmt.Errorf("get %s %s: %w", k, id.Short(), ErrInjected)
	}
	if s.failGets > 0 {
		s.failGets--
	}
	o, ok := s.objects[id]
	if !ok || o.kind != k {
		return nil, fmt.Errorf("get %s %s: %w", k, id.Short(), ErrNotFound)
	}
	return o.data, nil
}

// Stats returns the counts so far.
func (s *MemStore) Stats() MemStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Base returns the base hint the chunk id was last stored with.
func (s *MemStore) Base(id object.ID) object.ID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bases[id]
}

// Has reports whether s holds object id.
func (s *MemStore) Has(id object.ID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.objects[id]
	return ok
}

// FailPutsAfter makes every put after the next n fail with ErrInjected;
// a negative n stops that.
func (s *MemStore) FailPutsAfter(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failPuts = n
}

// FailGetsAfter makes every Get after the next n fail with ErrInjected; a
// negative n stops that.
func (s *MemStore) FailGetsAfter(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failGets = n
}

// Corrupt replaces object id's bytes with data, as a bad disk would; Verify
// then skips it.
func (s *MemStore) Corrupt(id object.ID, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.objects[id]
	o.data = bytes.Clone(data)
	s.objects[id] = o
	s.corrupted[id] = true
}

// Delete drops object id, as a lost row would.
func (s *MemStore) Delete(id object.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.objects, id)
}

// Verify checks that every object not corrupted on purpose has the ID of
// its bytes, and that every node decodes.
func (s *MemStore) Verify() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, o := range s.objects {
		if s.corrupted[id] {
			continue
		}
		if object.Sum(o.kind, o.data) != id {
			return fmt.Errorf("%s %s: bytes do not match the id: %w", o.kind, id.Short(), object.ErrCorrupt)
		}
		if o.kind == object.KindExtent {
			if _, err := DecodeNode(o.data); err != nil {
				return fmt.Errorf("%s %s: %w", o.kind, id.Short(), err)
			}
		}
	}
	return nil
}
