package bench

import (
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/layerfs/layerfs/extents"
	"github.com/layerfs/layerfs/store"
)

// bigFile is a 1 GiB file of random bytes in a Store on local disk, built
// once per process: random data is the worst case for compression and
// dedupe.
var bigFile struct {
	once sync.Once
	dir  string
	s    *store.Store
	f    extents.File
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bigFile.s != nil {
		bigFile.s.Close()
	}
	if bigFile.dir != "" {
		os.RemoveAll(bigFile.dir)
	}
	os.Exit(code)
}

const gib = 1 << 30

func benchDir() string {
	if d := os.Getenv("BENCH_WORK"); d != "" {
		return d
	}
	return "/var/tmp"
}

func openBigFile(b *testing.B) (*store.Store, extents.File) {
	b.Helper()
	bigFile.once.Do(func() {
		dir, err := os.MkdirTemp(benchDir(), "layerfs-bench-")
		if err != nil {
			bigFile.err = err
			return
		}
		bigFile.dir = dir
		s, err := store.Open(filepath.Join(dir, "big.layerfs"), store.Options{Create: true})
		if err != nil {
			bigFile.err = err
			return
		}
		bt := s.NewBatch()
		f, err := extents.Write(bt, &randReader{r: rand.New(rand.NewSource(1)), left: gib})
		if err == nil {
			err = bt.Flush()
		}
		bigFile.s, bigFile.f, bigFile.err = s, f, err
	})
	if bigFile.err != nil {
		b.Fatal(bigFile.err)
	}
	return bigFile.s, bigFile.f
}

type randReader struct {
	r    *rand.Rand
	left int64
}

func (r *randReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	n := min(int64(len(p)), r.left)
	r.r.Read(p[:n])
	r.left -= n
	return int(n), nil
}

// BenchmarkOverwrite4KiBIn1GiB: one 4 KiB pwrite in the middle of a 1 GiB
// stored file through the extents API, flushed to the Store. Bar: under
// 5 ms and at most 128 KiB of new stored bytes per edit.
func BenchmarkOverwrite4KiBIn1GiB(b *testing.B) {
	s, f := openBigFile(b)
	rng := rand.New(rand.NewSource(2))
	data := make([]byte, 4096)
	var stored int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rng.Read(data)
		off := gib/2 + rng.Int63n(64<<20)
		bt := s.NewBatch()
		if _, err := extents.Overwrite(bt, f, off, data); err != nil {
			b.Fatal(err)
		}
		if err := bt.Flush(); err != nil {
			b.Fatal(err)
		}
		stored += bt.Stats().StoredBytes
	}
	b.ReportMetric(float64(stored)/float64(b.N), "stored-B/op")
}

// BenchmarkRandomRead4KiB: 4 KiB reads at random offsets of a 1 GiB stored
// file, one goroutine. Bar: at least 10,000 reads/s on one core (run with
// -cpu 1).
func BenchmarkRandomRead4KiB(b *testing.B) {
	s, f := openBigFile(b)
	r := extents.NewReader(s, f)
	rng := rand.New(rand.NewSource(3))
	buf := make([]byte, 4096)
	b.SetBytes(4096)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := r.ReadAt(buf, rng.Int63n(gib-4096)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reads/s")
}
