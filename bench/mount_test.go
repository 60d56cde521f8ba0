package bench

import (
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/layerfs/layerfs/extents"
	"github.com/layerfs/layerfs/fusefs"
	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// The mount benchmarks serve a Commit in this process through fusefs and
// read it through the kernel. They need root and /dev/fuse and skip
// without them. bench/mount.sh compares whole commands against ext4 and
// go-fuse's loopback instead.

// needFUSE skips a benchmark that cannot mount FUSE.
func needFUSE(b *testing.B) {
	b.Helper()
	if os.Geteuid() != 0 {
		b.Skip("this benchmark needs root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		b.Skip("this benchmark needs /dev/fuse")
	}
}

// mountCommit mounts commit and returns the mountpoint and an unmount
// function, which the benchmark's cleanup also calls.
func mountCommit(b *testing.B, s *store.Store, commit object.ID) (string, func()) {
	b.Helper()
	mnt := b.TempDir()
	srv, err := fusefs.Mount(fusefs.Config{Store: s, Commit: commit, Mountpoint: mnt, Source: "bench",
		Logger: log.New(io.Discard, "", 0)})
	if err != nil {
		b.Fatal(err)
	}
	done := false
	unmount := func() {
		if !done {
			done = true
			if err := srv.Unmount(); err != nil {
				b.Error(err)
			}
		}
	}
	b.Cleanup(unmount)
	return mnt, unmount
}

// commitOf stores a Commit whose root holds one file.
func commitOf(b *testing.B, s *store.Store, name string, f extents.File) object.ID {
	b.Helper()
	bt := s.NewBatch()
	tree := &store.Tree{Entries: []store.Entry{{Name: name, Type: store.TypeFile, Mode: 0644, Size: f.Size, ID: f.ID}}}
	root, err := bt.PutTree(tree)
	var c object.ID
	if err == nil {
		c, err = bt.PutCommit(&store.Commit{Tree: root, Origin: store.OriginInit, Message: "bench"})
	}
	if ferr := bt.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// dropCaches empties the page cache, so the Store file is read from disk.
func dropCaches(b *testing.B) {
	b.Helper()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkMountSequentialRead1GiB: one pass over a 1 GiB file of random
// bytes (incompressible, so stored raw) through a fresh mount, so neither
// the kernel nor layerfs holds any of it. In store-cached the Store file
// is in the page cache, so this measures layerfs itself; in store-cold the
// page cache is dropped first and every byte comes from the Store file on
// disk. Bar: at least 500 MB/s.
func BenchmarkMountSequentialRead1GiB(b *testing.B) {
	needFUSE(b)
	s, f := openBigFile(b)
	commit := commitOf(b, s, "big", f)
	buf := make([]byte, 1<<20)
	for _, cold := range []bool{false, true} {
		name := map[bool]string{false: "store-cached", true: "store-cold"}[cold]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(f.Size)
			var cpu time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				mnt, unmount := mountCommit(b, s, commit)
				if cold {
					dropCaches(b)
				} else {
					warmStore(b, s)
				}
				b.StartTimer()
				c := cpuTime() // the server's and the reader's: both run here
				if n := readFile(b, filepath.Join(mnt, "big"), buf); n != f.Size {
					b.Fatalf("read %d bytes, want %d", n, f.Size)
				}
				cpu += cpuTime() - c
				b.StopTimer()
				unmount()
				b.StartTimer()
			}
			b.ReportMetric(cpu.Seconds()/float64(b.N)*float64(1<<30)/float64(f.Size), "cpu-s/GiB")
		})
	}
}

// warmStore reads the Store file, so that it is in the page cache.
func warmStore(b *testing.B, s *store.Store) {
	b.Helper()
	fh, err := os.Open(s.Path())
	if err != nil {
		b.Fatal(err)
	}
	defer fh.Close()
	if _, err := io.Copy(io.Discard, fh); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkMountSequentialRead1GiBWarm: the second pass over the file in
// one mount, from the kernel's page cache.
func BenchmarkMountSequentialRead1GiBWarm(b *testing.B) {
	needFUSE(b)
	s, f := openBigFile(b)
	mnt, _ := mountCommit(b, s, commitOf(b, s, "big", f))
	buf := make([]byte, 1<<20)
	readFile(b, filepath.Join(mnt, "big"), buf)
	b.SetBytes(f.Size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		readFile(b, filepath.Join(mnt, "big"), buf)
	}
}

func readFile(b *testing.B, path string, buf []byte) int64 {
	fh, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer fh.Close()
	n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{fh}, buf)
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkMountTime15kFiles: mounting a Commit of 15,000 files in 1,500
// directories and unmounting it. Nothing is scanned at mount, so the cost
// does not depend on the tree. Bar: mount under 50 ms.
func BenchmarkMountTime15kFiles(b *testing.B) {
	needFUSE(b)
	s := store.NewTestStore(b)
	commit := manyFiles(b, s, 1500, 10)
	mnt := b.TempDir()
	var mounting time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := time.Now()
		srv, err := fusefs.Mount(fusefs.Config{Store: s, Commit: commit, Mountpoint: mnt, Source: "bench",
			Logger: log.New(io.Discard, "", 0)})
		if err != nil {
			b.Fatal(err)
		}
		mounting += time.Since(t)
		if err := srv.Unmount(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(mounting.Microseconds())/1000/float64(b.N), "mount-ms/op")
}

// manyFiles stores a Commit of dirs directories of perDir small files.
func manyFiles(b *testing.B, s *store.Store, dirs, perDir int) object.ID {
	b.Helper()
	bt := s.NewBatch()
	var root store.Tree
	for d := 0; d < dirs; d++ {
		var t store.Tree
		for i := 0; i < perDir; i++ {
			f, err := extents.WriteBytes(bt, []byte(fmt.Sprintf("file %d of dir %d\n", i, d)))
			if err != nil {
				b.Fatal(err)
			}
			t.Entries = append(t.Entries, store.Entry{Name: fmt.Sprintf("f%03d.go", i), Type: store.TypeFile, Mode: 0644, Size: f.Size, ID: f.ID})
		}
		id, err := bt.PutTree(&t)
		if err != nil {
			b.Fatal(err)
		}
		root.Entries = append(root.Entries, store.Entry{Name: fmt.Sprintf("d%05d", d), Type: store.TypeDir, Mode: 0755, ID: id})
	}
	id, err := bt.PutTree(&root)
	var c object.ID
	if err == nil {
		c, err = bt.PutCommit(&store.Commit{Tree: id, Origin: store.OriginInit, Message: "bench"})
	}
	if ferr := bt.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		b.Fatal(err)
	}
	return c
}
