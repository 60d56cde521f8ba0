package lowerfs

import (
	"errors"
	"io"
	"math/rand"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/layerfs/layerfs/extents"
	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

func sampleEntries() map[string]TestEntry {
	return map[string]TestEntry{
		"README":          {Data: "hello\n", Mode: 0600, UID: 1000, GID: 100, MTime: 42},
		"bin/tool":        {Data: "#!/bin/sh\n", Mode: 04755},
		"src/a/b/c.go":    {Data: "package c\n"},
		"src/link":        {Target: "../README"},
		"empty":           {Dir: true, Mode: 0700},
		"src/a/empty.txt": {},
	}
}

func openSample(t *testing.T, opts Options) (*View, *store.Store) {
	t.Helper()
	s := store.NewTestStore(t)
	id := WriteTestCommit(t, s, sampleEntries())
	v, err := Open(s, id, opts)
	if err != nil {
		t.Fatal(err)
	}
	return v, s
}

func TestStatReportsStoredMetadata(t *testing.T) {
	v, _ := openSample(t, Options{})
	for path, want := range map[string]store.Entry{
		"README":          {Type: store.TypeFile, Mode: 0600, UID: 1000, GID: 100, Size: 6, MTime: 42},
		"bin/tool":        {Type: store.TypeFile, Mode: 04755, Size: 10, MTime: TestMTime},
		"src/link":        {Type: store.TypeSymlink, Mode: 0777, Size: 9, MTime: TestMTime},
		"empty":           {Type: store.TypeDir, Mode: 0700, MTime: TestMTime},
		"src/a/empty.txt": {Type: store.TypeFile, Mode: 0644, MTime: TestMTime},
	} {
		e, err := v.Stat(path)
		if err != nil {
			t.Fatalf("stat %s: %v", path, err)
		}
		got := store.Entry{Type: e.Type, Mode: e.Mode, UID: e.UID, GID: e.GID, Size: e.Size, MTime: e.MTime}
		if got != want {
			t.Errorf("stat %s = %+v, want %+v", path, got, want)
		}
	}
	if r, _ := v.Stat(""); r.Type != store.TypeDir || r.MTime != TestMTime {
		t.Errorf("root = %+v", r)
	}
}

func TestStatErrors(t *testing.T) {
	v, _ := openSample(t, Options{})
	for path, want := range map[string]error{
		"nope":          ErrNotExist,
		"src/a/nope":    ErrNotExist,
		"README/x":      ErrNotDir,
		"src/../README": ErrInvalid,
		"/README":       ErrInvalid,
	} {
		if _, err := v.Stat(path); !errors.Is(err, want) {
			t.Errorf("stat %q: %v, want %v", path, err, want)
		}
	}
}

func TestReadDirAndReadlink(t *testing.T) {
	v, _ := openSample(t, Options{})
	src, _ := v.Stat("src")
	ents, err := v.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 2 || ents[0].Name != "a" || ents[0].Type != store.TypeDir || ents[1].Name != "link" {
		t.Fatalf("readdir src = %+v", ents)
	}
	if target, err := v.Readlink(ents[1]); err != nil || target != "../README" {
		t.Errorf("readlink = %q, %v", target, err)
	}
	if _, err := v.Readlink(ents[0]); !errors.Is(err, ErrNotSymlink) {
		t.Errorf("readlink of a dir: %v", err)
	}
	readme, _ := v.Stat("README")
	if _, err := v.ReadDir(readme); !errors.Is(err, ErrNotDir) {
		t.Errorf("readdir of a file: %v", err)
	}
	if _, err := v.OpenFile(src); !errors.Is(err, ErrIsDir) {
		t.Errorf("open of a dir: %v", err)
	}
}

func TestReadSmallFiles(t *testing.T) {
	v, _ := openSample(t, Options{})
	for path, want := range map[string]string{"README": "hello\n", "src/a/b/c.go": "package c\n", "src/a/empty.txt": ""} {
		if got := readAll(t, v, path); string(got) != want {
			t.Errorf("%s = %q, want %q", path, got, want)
		}
	}
	e, _ := v.Stat("README")
	f, _ := v.OpenFile(e)
	buf := make([]byte, 10)
	if n, err := f.ReadAt(buf, 3); n != 3 || err != io.EOF || string(buf[:n]) != "lo\n" {
		t.Errorf("short read: %d %v %q", n, err, buf[:n])
	}
	if n, err := f.ReadAt(buf, 100); n != 0 || err != io.EOF {
		t.Errorf("read past the end: %d %v", n, err)
	}
	if _, err := f.ReadAt(buf, -1); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative offset: %v", err)
	}
}

func readAll(t *testing.T, v *View, path string) []byte {
	t.Helper()
	e, err := v.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := v.OpenFile(e)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(io.NewSectionReader(f, 0, f.Size()))
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return data
}

func randomBytes(seed int64, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

// bigView holds one 3 MiB file of random bytes, "big", about 190 chunks.
func bigView(t *testing.T, opts Options) (*View, []byte) {
	t.Helper()
	s := store.NewTestStore(t)
	data := randomBytes(1, 3<<20+1234)
	id := WriteTestCommit(t, s, map[string]TestEntry{"big": {Data: string(data)}})
	v, err := Open(s, id, opts)
	if err != nil {
		t.Fatal(err)
	}
	return v, data
}

// bigFile is bigView's big file, opened.
func bigFile(t *testing.T, opts Options) (*View, *File, []byte) {
	t.Helper()
	v, data := bigView(t, opts)
	e, err := v.Stat("big")
	if err != nil {
		t.Fatal(err)
	}
	f, err := v.OpenFile(e)
	if err != nil {
		t.Fatal(err)
	}
	return v, f, data
}

// concurrently runs body on four goroutines, each with a random source of
// its own, and waits for them.
func concurrently(body func(rnd *rand.Rand)) {
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() { body(rand.New(rand.NewSource(int64(g)))) })
	}
	wg.Wait()
}

func TestReadLargeFileSequentially(t *testing.T) {
	c := NewCache(0)
	defer c.Close()
	v, data := bigView(t, Options{Cache: c})
	if got := readAll(t, v, "big"); string(got) != string(data) {
		t.Fatal("content differs")
	}
	if st := c.Stats(); st.Prefetched == 0 {
		t.Errorf("a sequential read prefetched nothing: %+v", st)
	}
}

func TestReadLargeFileAtRandomConcurrently(t *testing.T) {
	v, f, data := bigFile(t, Options{Cache: NewCache(512 << 10)})
	concurrently(func(rnd *rand.Rand) {
		for i := 0; i < 50; i++ {
			off := rnd.Int63n(int64(len(data)))
			buf := make([]byte, rnd.Intn(300<<10))
			n, err := f.ReadAt(buf, off)
			if err != nil && err != io.EOF {
				t.Errorf("read at %d: %v", off, err)
				return
			}
			if string(buf[:n]) != string(data[off:off+int64(n)]) {
				t.Errorf("read at %d+%d: content differs", off, n)
				return
			}
		}
	})
	if st := v.Cache().Stats(); st.Bytes > st.MaxBytes || st.Evictions == 0 {
		t.Errorf("cache not bounded: %+v", st)
	}
}

func TestCacheIsSharedAcrossViews(t *testing.T) {
	s := store.NewTestStore(t)
	big := string(randomBytes(2, 1<<20))
	c1 := WriteTestCommit(t, s, map[string]TestEntry{"f": {Data: big}, "x": {Data: "one"}})
	c2 := WriteTestCommit(t, s, map[string]TestEntry{"f": {Data: big}, "x": {Data: "two"}}, c1)
	cache := NewCache(0)
	defer cache.Close()
	v1, _ := Open(s, c1, Options{Cache: cache, ReadAhead: -1})
	v2, _ := Open(s, c2, Options{Cache: cache, ReadAhead: -1})
	readAll(t, v1, "f")
	misses := cache.Stats().Misses
	if got := readAll(t, v2, "f"); string(got) != big {
		t.Fatal("content differs")
	}
	if st := cache.Stats(); st.Misses-misses > 2 { // v2's root tree; "f" is shared
		t.Errorf("second view loaded %d objects, want at most 2", st.Misses-misses)
	}
	if a, b := string(readAll(t, v1, "x")), string(readAll(t, v2, "x")); a != "one" || b != "two" {
		t.Errorf("x = %q and %q", a, b)
	}
}

func TestOpenMissingCommit(t *testing.T) {
	s := store.NewTestStore(t)
	_, err := Open(s, object.Sum(object.KindCommit, []byte("nope")), Options{})
	if !errors.Is(err, store.ErrNotFound) || !errors.Is(err, ErrUnreadable) {
		t.Errorf("open of a missing commit: %v", err)
	}
}

// failingStore fails Get for chosen objects.
type failingStore struct {
	Store
	bad map[object.ID]bool
}

func (s *failingStore) Get(id object.ID, k object.Kind) ([]byte, error) {
	if s.bad[id] {
		return nil, store.ErrNotFound
	}
	return s.Store.Get(id, k)
}

func TestMissingObjectsAreUnreadableNotAbsent(t *testing.T) {
	s := store.NewTestStore(t)
	data := randomBytes(3, 1<<20)
	id := WriteTestCommit(t, s, map[string]TestEntry{"big": {Data: string(data)}, "dir/f": {Data: "f"}, "ok": {Data: "fine"}})
	v0, _ := Open(s, id, Options{})
	big, _ := v0.Stat("big")
	dir, _ := v0.Stat("dir")
	var chunk object.ID
	for e := range extents.NewReader(s, extents.File{ID: big.ID, Size: big.Size}).Extents(300<<10, 1) {
		chunk = e.Chunk
	}
	fs := &failingStore{Store: s, bad: map[object.ID]bool{chunk: true, dir.ID: true}}
	v, _ := Open(fs, id, Options{})
	e, _ := v.Stat("big")
	f, _ := v.OpenFile(e)
	buf := make([]byte, 4096)
	if _, err := f.ReadAt(buf, 0); err != nil {
		t.Errorf("read before the bad chunk: %v", err)
	}
	_, err := f.ReadAt(buf, 300<<10)
	var oe *ObjectError
	if !errors.As(err, &oe) || oe.ID != chunk || !errors.Is(err, ErrUnreadable) || errors.Is(err, ErrNotExist) {
		t.Errorf("read of the bad chunk: %v", err)
	}
	if _, err := v.Stat("dir/f"); !errors.Is(err, ErrUnreadable) || errors.Is(err, ErrNotExist) {
		t.Errorf("lookup in a missing tree: %v", err)
	}
	if got := readAll(t, v, "ok"); string(got) != "fine" {
		t.Errorf("other file: %q", got)
	}
}

func TestCorruptChunkInStoreFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.layerfs")
	s, err := store.Open(path, store.Options{Create: true, Durability: store.Fast})
	if err != nil {
		t.Fatal(err)
	}
	id := WriteTestCommit(t, s, map[string]TestEntry{"bad": {Data: string(randomBytes(4, 5000))}, "good": {Data: "good"}})
	v0, _ := Open(s, id, Options{})
	bad, _ := v0.Stat("bad")
	s.Close()
	store.CorruptObject(t, path, bad.ID)
	s, err = store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v, _ := Open(s, id, Options{})
	f, _ := v.OpenFile(bad)
	if _, err := f.ReadAt(make([]byte, 10), 0); !errors.Is(err, store.ErrCorrupt) || !errors.Is(err, ErrUnreadable) {
		t.Errorf("read of a corrupt chunk: %v", err)
	}
	if got := readAll(t, v, "good"); string(got) != "good" {
		t.Errorf("other file: %q", got)
	}
}

// TestSlicesStayValidUntilReleased reads slices while other readers make
// a small Cache evict and recycle chunk buffers, and checks each read's
// slices only after more reads went by, just before releasing them: a
// buffer recycled while held would show another chunk's bytes.
func TestSlicesStayValidUntilReleased(t *testing.T) {
	v, f, data := bigFile(t, Options{Cache: NewCache(256 << 10)})
	concurrently(func(rnd *rand.Rand) {
		type held struct {
			off     int64
			slices  [][]byte
			release func()
		}
		var pending []held
		for i := 0; i < 100; i++ {
			off := rnd.Int63n(int64(len(data)))
			slices, release, err := f.Slices(off, rnd.Int63n(256<<10))
			if err != nil {
				t.Errorf("slices at %d: %v", off, err)
				return
			}
			pending = append(pending, held{off, slices, release})
			if len(pending) < 3 {
				continue
			}
			h := pending[0]
			pending = pending[1:]
			var got []byte
			for _, s := range h.slices {
				got = append(got, s...)
			}
			if string(got) != string(data[h.off:h.off+int64(len(got))]) {
				t.Errorf("slices at %d changed before they were released", h.off)
			}
			h.release()
		}
		for _, h := range pending {
			h.release()
		}
	})
	if st := v.Cache().Stats(); st.Evictions == 0 {
		t.Errorf("nothing was evicted: %+v", st)
	}
}

func TestSlicesMatchReadAt(t *testing.T) {
	v, f, data := bigFile(t, Options{})
	rnd := rand.New(rand.NewSource(5))
	for i := 0; i < 200; i++ {
		off := rnd.Int63n(int64(len(data)) + 100)
		n := rnd.Int63n(1 << 20)
		slices, release, err := f.Slices(off, n)
		if err != nil {
			t.Fatalf("slices at %d+%d: %v", off, n, err)
		}
		var got []byte
		for _, s := range slices {
			got = append(got, s...)
		}
		release()
		want := data[min(off, int64(len(data))):min(off+n, int64(len(data)))]
		if string(got) != string(want) {
			t.Fatalf("slices at %d+%d: %d bytes, want %d", off, n, len(got), len(want))
		}
	}
	if _, _, err := f.Slices(-1, 10); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative offset: %v", err)
	}
	small, _ := v.OpenFile(store.Entry{Name: "empty", Type: store.TypeFile, ID: object.Sum(object.KindChunk, nil)})
	if s, _, err := small.Slices(0, 10); err != nil || len(s) != 0 {
		t.Errorf("empty file: %q %v", s, err)
	}
}

func TestReadDirReadsAheadSubtrees(t *testing.T) {
	s := store.NewTestStore(t)
	id := WriteTestCommit(t, s, map[string]TestEntry{"a/x": {Data: "a"}, "b/x": {Data: "b"}, "c/d/x": {Data: "c"}, "f": {}})
	cache := NewCache(0)
	defer cache.Close()
	v, _ := Open(s, id, Options{Cache: cache})
	if _, err := v.ReadDir(v.Root()); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); cache.Stats().Prefetched < 3; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("subdirectory trees not read ahead: %+v", cache.Stats())
		}
	}
	misses := cache.Stats().Misses
	for _, p := range []string{"a/x", "b/x", "c/d"} {
		if _, err := v.Stat(p); err != nil {
			t.Fatal(err)
		}
	}
	if got := cache.Stats().Misses; got != misses {
		t.Errorf("%d trees loaded after the listing read them ahead", got-misses)
	}
}
