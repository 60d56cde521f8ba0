package bench

import (
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/layerfs/layerfs"
	"github.com/layerfs/layerfs/publish"
	"github.com/layerfs/layerfs/store"
)

// What small changes to a big file cost the Store, through the SDK's file
// calls, each one a Commit: 16 writeAts of 10 bytes spread over a 32 MiB
// file of random bytes (the worst case for compression), then prepending
// 10 bytes by rewriting the whole file. The figures are stored bytes
// (Store.Stats, compressed or delta, everything each Commit wrote: chunks,
// extent nodes, trees, commit, layer) and the Store file's growth.
// Bars: at most 0.25 MiB for the 16 writeAts, 0.05 MiB for the prepend.
//
//	go test -run '^$' -bench 'BigFileEdits' -benchtime 1x -v ./bench/

const bigEditSize = 32 << 20

func BenchmarkBigFileEdits(b *testing.B) {
	var writeAt, prepend, writeAtFile, prependFile int64
	for i := 0; i < b.N; i++ {
		r := bigFileEdits(b)
		writeAt += r.writeAt.StoredBytes
		prepend += r.prepend.StoredBytes
		writeAtFile += r.writeAt.FileBytes
		prependFile += r.prepend.FileBytes
	}
	n := float64(b.N)
	b.ReportMetric(float64(writeAt)/n/(1<<20), "writeAt-stored-MiB")
	b.ReportMetric(float64(prepend)/n/(1<<20), "prepend-stored-MiB")
	b.ReportMetric(float64(writeAtFile)/n/(1<<20), "writeAt-file-MiB")
	b.ReportMetric(float64(prependFile)/n/(1<<20), "prepend-file-MiB")
	b.Logf("16 writeAts of 10 B: +%d stored bytes (bar %d), Store file +%d B; prepend 10 B: +%d stored bytes (bar %d), Store file +%d B",
		writeAt/int64(b.N), 256<<10, writeAtFile/int64(b.N), prepend/int64(b.N), 51<<10, prependFile/int64(b.N))
	if writeAt/int64(b.N) > 256<<10 || prepend/int64(b.N) > 51<<10 {
		b.Errorf("over the bar") // a size bar, not a timed one
	}
}

type growth struct{ StoredBytes, FileBytes int64 }

type bigEditResult struct{ writeAt, prepend growth }

func bigFileEdits(b *testing.B) bigEditResult {
	b.StopTimer()
	defer b.StartTimer()
	path := emptyProject(b)
	data := make([]byte, bigEditSize)
	rand.New(rand.NewSource(4)).Read(data)
	withFS(b, path, func(f *layerfs.FS) { mustCommit(b)(f.Write("big.bin", data)) })
	s0 := settle(b, path)
	withFS(b, path, func(f *layerfs.FS) {
		b.StartTimer()
		for i := 0; i < 16; i++ {
			off := int64(i)*(bigEditSize/16) + 4321
			patch := []byte("0123456789")
			mustCommit(b)(f.WriteAt("big.bin", off, patch))
			copy(data[off:], patch)
		}
		b.StopTimer()
	})
	s1 := settle(b, path)
	withFS(b, path, func(f *layerfs.FS) {
		b.StartTimer()
		mustCommit(b)(f.Write("big.bin", append([]byte("prepended!"), data...)))
		b.StopTimer()
		if got, _ := f.Read("big.bin"); len(got) != bigEditSize+10 || string(got[:10]) != "prepended!" || string(got[10+4321:][:10]) != "0123456789" {
			b.Fatal("big.bin does not read back as written")
		}
	})
	s2 := settle(b, path)
	return bigEditResult{
		writeAt: growth{s1.StoredBytes - s0.StoredBytes, s1.FileBytes - s0.FileBytes},
		prepend: growth{s2.StoredBytes - s1.StoredBytes, s2.FileBytes - s1.FileBytes},
	}
}

// emptyProject makes a new Store on local disk whose main holds one small
// file, and returns its path.
func emptyProject(b *testing.B) string {
	dir := b.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "README"), []byte("bench\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "s.layerfs")
	st, err := layerfs.Open(path, layerfs.Options{Create: true, Durability: store.Normal})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Init(src, layerfs.InitOptions{}); err != nil {
		b.Fatal(err)
	}
	return path
}

// withFS runs fn with an FS on main of the Store at path, in Normal
// durability, and closes the Store after.
func withFS(b *testing.B, path string, fn func(f *layerfs.FS)) {
	st, err := layerfs.Open(path, layerfs.Options{Durability: store.Normal})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	f, err := st.FS("main")
	if err != nil {
		b.Fatal(err)
	}
	fn(f)
}

// settle measures a closed Store: closing checkpoints the WAL into the
// file and removes it, so FileBytes is the file alone.
func settle(b *testing.B, path string) store.Stats {
	st, err := layerfs.Open(path, layerfs.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	s, err := st.Backend().Stats()
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// mustCommit checks that a call made a Commit: mustCommit(b)(f.Write(...)).
func mustCommit(b *testing.B) func(*layerfs.Result, error) *layerfs.Result {
	return func(res *layerfs.Result, err error) *layerfs.Result {
		b.Helper()
		if err != nil {
			b.Fatal(err)
		}
		if res.Status != publish.Committed {
			b.Fatalf("%s, want committed", res.Status)
		}
		return res
	}
}
