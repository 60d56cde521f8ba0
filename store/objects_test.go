package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/layerfs/layerfs/object"
)

func randBytes(seed int64, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

func putFlush(t *testing.T, s *Store, k object.Kind, data []byte) object.ID {
	t.Helper()
	b := s.NewBatch()
	id, err := b.Put(k, data)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestPutGetDedupeAndCompression(t *testing.T) {
	s := NewTestStore(t)
	text := bytes.Repeat([]byte("the same line, again and again\n"), 1000)
	noise := randBytes(1, 20000)
	b := s.NewBatch()
	idText, _ := b.Put(object.KindChunk, text)
	idText2, _ := b.Put(object.KindChunk, text)
	idNoise, _ := b.Put(object.KindChunk, noise)
	if idText != idText2 || idText != object.Sum(object.KindChunk, text) {
		t.Fatal("identical content must get one id, the hash of kind and bytes")
	}
	if got, err := b.Get(idNoise, object.KindChunk); err != nil || !bytes.Equal(got, noise) {
		t.Fatal("pending object not readable through the batch")
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	st := b.Stats()
	if st.New != 2 || st.Reused != 1 {
		t.Errorf("stats: %+v, want 2 new 1 reused", st)
	}
	var enc, stored int
	s.r.QueryRow(`SELECT enc, length(data) FROM objects WHERE id = ?`, idText[:]).Scan(&enc, &stored)
	if enc != encZstd || stored > len(text)/10 {
		t.Errorf("compressible chunk stored with enc %d in %d bytes", enc, stored)
	}
	s.r.QueryRow(`SELECT enc, length(data) FROM objects WHERE id = ?`, idNoise[:]).Scan(&enc, &stored)
	if enc != encRaw || stored != len(noise) {
		t.Errorf("incompressible chunk stored with enc %d in %d bytes, want raw", enc, stored)
	}
	for id, want := range map[object.ID][]byte{idText: text, idNoise: noise} {
		got, err := s.Get(id, object.KindChunk)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("get %s: %v", id.Short(), err)
		}
	}
	if _, err := s.Get(idText, object.KindTree); !errors.Is(err, ErrCorrupt) {
		t.Errorf("get with the wrong kind: %v, want ErrCorrupt", err)
	}
	if _, err := s.Get(object.Sum(object.KindChunk, []byte("nope")), object.KindChunk); !errors.Is(err, ErrNotFound) {
		t.Errorf("get missing: %v, want ErrNotFound", err)
	}
}

func TestDeltaAgainstPreviousVersion(t *testing.T) {
	s := NewTestStore(t)
	v1 := randBytes(2, 30000)
	v2 := append([]byte(nil), v1...)
	copy(v2[15000:], "a small edit in the middle")
	id1 := putFlush(t, s, object.KindChunk, v1)
	b := s.NewBatch()
	id2, err := b.PutChunk(v2, id1)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.StoredBytes > 1000 {
		t.Errorf("a 26-byte edit of a 30 KB chunk stored %d bytes, want a small delta", st.StoredBytes)
	}
	got, err := s.Get(id2, object.KindChunk)
	if err != nil || !bytes.Equal(got, v2) {
		t.Fatalf("read delta: %v", err)
	}
	// A chain stops at maxDeltaDepth: reads stay bounded.
	prev, cur := id2, v2
	for i := 0; i < 2*maxDeltaDepth; i++ {
		next := append([]byte(nil), cur...)
		next[i*100] ^= 0xff
		b := s.NewBatch()
		id, _ := b.PutChunk(next, prev)
		if err := b.Flush(); err != nil {
			t.Fatal(err)
		}
		prev, cur = id, next
	}
	var maxDepth int
	s.r.QueryRow(`SELECT max(depth) FROM objects`).Scan(&maxDepth)
	if maxDepth > maxDeltaDepth {
		t.Errorf("delta depth %d exceeds %d", maxDepth, maxDeltaDepth)
	}
	if got, err := s.Get(prev, object.KindChunk); err != nil || !bytes.Equal(got, cur) {
		t.Fatalf("read end of chain: %v", err)
	}
}

func TestObjectsAndSealedPacksAreAppendOnly(t *testing.T) {
	s := NewTestStore(t)
	id := putFlush(t, s, object.KindChunk, []byte("immutable"))
	for _, q := range []string{
		`UPDATE objects SET data = x'00' WHERE id = ?`,
		`DELETE FROM objects WHERE id = ?`,
		`UPDATE packs SET objects = 0 WHERE id = (SELECT pack FROM objects WHERE id = ?)`,
		`DELETE FROM packs WHERE id = (SELECT pack FROM objects WHERE id = ?)`,
		`INSERT INTO objects(id, kind, size, enc, pack, data) SELECT x'0102', 1, 1, 0, pack, x'00' FROM objects WHERE id = ?`,
	} {
		_, err := s.w.Exec(q, id[:])
		if err == nil || !strings.Contains(err.Error(), "layerfs:") {
			t.Errorf("%s: got %v, want a refusal by the append-only triggers", q, err)
		}
	}
	if got, err := s.Get(id, object.KindChunk); err != nil || string(got) != "immutable" {
		t.Fatalf("object changed: %q %v", got, err)
	}
}

func TestCorruptObjectIsDetected(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.layerfs")
	s, err := Open(path, Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	good := putFlush(t, s, object.KindChunk, randBytes(3, 9000))
	bad := putFlush(t, s, object.KindChunk, bytes.Repeat([]byte("compressible text "), 900))
	s.Close()
	CorruptObject(t, path, bad)
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Get(bad, object.KindChunk); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), bad.Short()) {
		t.Errorf("read corrupt object: %v, want ErrCorrupt naming it", err)
	}
	if _, err := s.Get(good, object.KindChunk); err != nil {
		t.Errorf("other objects must stay readable: %v", err)
	}
	errs := map[object.ID]error{}
	err = s.GetManyInto([]object.ID{good, bad}, object.KindChunk, func(n int) []byte { return make([]byte, n) },
		func(id object.ID, data []byte, err error) { errs[id] = err })
	if err != nil || errs[good] != nil || !errors.Is(errs[bad], ErrCorrupt) {
		t.Errorf("GetManyInto of a good and a corrupt object: %v; %v, %v", err, errs[good], errs[bad])
	}
}

func TestBatchWritesManyPacksAndConcurrentPuts(t *testing.T) {
	s := NewTestStore(t)
	b := s.NewBatch()
	var wg sync.WaitGroup
	ids := make([]object.ID, 64)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := g; i < len(ids); i += 4 {
				id, err := b.Put(object.KindChunk, randBytes(int64(100+i), 512<<10))
				if err != nil {
					t.Error(err)
				}
				ids[i] = id
			}
		}(g)
	}
	wg.Wait()
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.Packs < 3 || st.New != len(ids) {
		t.Errorf("32 MiB in one batch: %+v, want several packs and %d objects", st, len(ids))
	}
	for i, id := range ids {
		got, err := s.Get(id, object.KindChunk)
		if err != nil || !bytes.Equal(got, randBytes(int64(100+i), 512<<10)) {
			t.Fatalf("object %d: %v", i, err)
		}
	}
}

func TestTwoStoreHandlesWriteInTurns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.layerfs")
	a, err := Open(path, Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var wg sync.WaitGroup
	for i, s := range []*Store{a, b} {
		wg.Add(1)
		go func(i int, s *Store) {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				bt := s.NewBatch()
				bt.Put(object.KindChunk, randBytes(int64(i*1000+j), 4096))
				if err := bt.Flush(); err != nil {
					t.Error(err)
				}
			}
		}(i, s)
	}
	wg.Wait()
	var n int
	a.r.QueryRow(`SELECT count(*) FROM objects`).Scan(&n)
	if n != 100 {
		t.Errorf("%d objects, want 100", n)
	}
}

// TestRawBytesAreFresh guards what reads rely on to skip a copy: the
// driver hands out a new slice for every blob, so bytes read earlier do
// not change when later rows are read.
func TestRawBytesAreFresh(t *testing.T) {
	s := NewTestStore(t)
	a, b := randBytes(20, 5000), randBytes(21, 5000)
	ida := putFlush(t, s, object.KindChunk, a)
	idb := putFlush(t, s, object.KindChunk, b)
	got, err := s.Get(ida, object.KindChunk)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if _, err := s.Get(idb, object.KindChunk); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, a) {
		t.Fatal("a later read changed bytes an earlier read returned")
	}
}

// TestStageSpillsInBackground: a Stage past stageSpill writes packs while
// it goes on staging; its objects stay readable, a ref transaction that
// takes it while a spill is under way still lands every object, and
// Flush waits for the spills.
func TestStageSpillsInBackground(t *testing.T) {
	s := NewTestStore(t)
	st := s.NewStage()
	var ids []object.ID
	for i := 0; i < 3*stageSpill/(16<<10)+5; i++ {
		data := make([]byte, 16<<10)
		rand.New(rand.NewSource(int64(i))).Read(data)
		id, err := st.PutChunk(data, object.Zero)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := st.Get(id, object.KindChunk); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("chunk %d: read back %d bytes, %v", i, len(got), err)
		}
		ids = append(ids, id)
	}
	// A ref transaction takes what is staged and what is being spilled.
	if err := s.Update(func(tx *RefTx) error { tx.Write(st); return nil }); err != nil {
		t.Fatal(err)
	}
	st.Flush()
	for _, id := range ids {
		if ok, err := s.Has(id); !ok || err != nil {
			t.Fatalf("chunk %s not stored: %v", id.Short(), err)
		}
	}
	if n := st.Stats().New; n != len(ids) {
		t.Errorf("stats count %d new objects, want %d", n, len(ids))
	}
}

// TestStagePutChunks: a run of chunks staged at once — some stored, some
// staged, some twice in the run; random ones (not asked about) and
// compressible ones (asked about) — gets the IDs PutChunk gives, and each
// new one is written once.
func TestStagePutChunks(t *testing.T) {
	s := NewTestStore(t)
	chunk := func(i int) []byte { return randBytes(int64(1000+i), 16<<10) }
	small := func(i int) []byte { return randBytes(int64(2000+i), 1<<10) } // not asked about
	text := func(i int) []byte { return bytes.Repeat([]byte(fmt.Sprintf("line %d of some text\n", i)), 800) }
	st := s.NewStage()
	for _, c := range [][]byte{chunk(0), chunk(1), chunk(2), small(0), text(0)} {
		if _, err := st.PutChunk(c, object.Zero); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Flush(); err != nil {
		t.Fatal(err)
	}
	st = s.NewStage()
	st.PutChunk(chunk(3), object.Zero)
	run := [][]byte{chunk(0), chunk(3), chunk(4), chunk(4), chunk(5), small(0), small(1), text(0), text(1), text(1)}
	for i := 6; i < 40; i++ {
		run = append(run, chunk(i))
	}
	ids, err := st.PutChunks(run)
	if err != nil {
		t.Fatal(err)
	}
	for i, data := range run {
		if ids[i] != object.Sum(object.KindChunk, data) {
			t.Fatalf("chunk %d: id %s", i, ids[i].Short())
		}
	}
	if err := st.Flush(); err != nil {
		t.Fatal(err)
	}
	// 3, 4, 5, 6..39, small(1) and text(1); chunk(0) and small(0),
	// staged again without asking, are stored already and not written
	// twice; text(0) is found stored.
	if got := st.Stats().New; got != 39 {
		t.Errorf("%d new objects written, want 39", got)
	}
	if got := st.Stats().Reused; got != 3 {
		t.Errorf("%d objects reused, want 3", got)
	}
	for _, c := range []struct {
		data []byte
		enc  int
	}{{chunk(4), encRaw}, {text(1), encZstd}} {
		var enc int
		id := object.Sum(object.KindChunk, c.data)
		if err := s.r.QueryRow(`SELECT enc FROM objects WHERE id = ?`, id[:]).Scan(&enc); err != nil || enc != c.enc {
			t.Errorf("stored with encoding %d (%v), want %d", enc, err, c.enc)
		}
	}
	if held, err := s.HasMany(ids); err != nil || len(held) != len(ids) {
		t.Fatalf("HasMany: %v, %v", held, err)
	} else {
		for i, ok := range held {
			if !ok {
				t.Errorf("chunk %d not stored", i)
			}
		}
	}
}

// TestStageReadsThroughWriter: a Stage told to read through the writer's
// connection reads what the Store holds there too, and verifies it: a
// corrupt object is ErrCorrupt either way.
func TestStageReadsThroughWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.layerfs")
	s, err := Open(path, Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	data := randBytes(4, 9000)
	good := putFlush(t, s, object.KindChunk, data)
	bad := putFlush(t, s, object.KindChunk, bytes.Repeat([]byte("compressible text "), 900))
	s.Close()
	CorruptObject(t, path, bad)
	if s, err = Open(path, Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st := s.NewStage()
	for _, on := range []bool{true, false} {
		st.ReadThroughWriter(on)
		if got, err := st.Get(good, object.KindChunk); err != nil || !bytes.Equal(got, data) {
			t.Errorf("through the writer %v: %v, or other bytes", on, err)
		}
		if _, err := st.Get(bad, object.KindChunk); !errors.Is(err, ErrCorrupt) {
			t.Errorf("through the writer %v: a corrupt object read as %v", on, err)
		}
	}
}
