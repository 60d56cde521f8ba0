package bench

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/layerfs/layerfs"
	"github.com/layerfs/layerfs/store"
)

// History queries on Go's source tree (~15k files).
//
//	go test -run '^$' -bench 'Diff|Blame' ./bench/

// BenchmarkDiffOneFile: Store.Diff between two commits of the Go tree that
// differ in one file, the deepest .go file of the tree. "warm": one open
// Store, its tree cache filled by earlier iterations; "cold": a Store
// opened fresh for every diff (the open is not timed), so every tree on the
// path is read from SQLite. Bar: under 5 ms.
func BenchmarkDiffOneFile(b *testing.B) {
	path, a, c := oneFileApart(b)
	b.Run("warm", func(b *testing.B) {
		st := openStore(b, path)
		defer st.Close()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			diffOnce(b, st, a, c)
		}
		reportMs(b)
	})
	b.Run("cold", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			st := openStore(b, path)
			b.StartTimer()
			diffOnce(b, st, a, c)
			b.StopTimer()
			st.Close()
			b.StartTimer()
		}
		reportMs(b)
	})
}

func diffOnce(b *testing.B, st *layerfs.Store, a, c string) {
	d, err := st.Diff(a, c)
	if err != nil {
		b.Fatal(err)
	}
	if len(d) != 1 {
		b.Fatalf("diff lists %d paths, want 1", len(d))
	}
}

func reportMs(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
}

// oneFileApart copies the Go-tree Store and makes one commit on main that
// rewrites its deepest .go file; it returns the Store and both commit ids.
func oneFileApart(b *testing.B) (path, before, after string) {
	b.Helper()
	path = copyGoTree(b)
	st := openStore(b, path)
	defer st.Close()
	f, err := st.FS("main")
	if err != nil {
		b.Fatal(err)
	}
	files, err := f.Glob("**/*.go")
	if err != nil {
		b.Fatal(err)
	}
	deepest := files[0]
	for _, p := range files {
		if strings.Count(p, "/") > strings.Count(deepest, "/") {
			deepest = p
		}
	}
	before = f.Base().String()
	res := mustCommit(b)(f.Write(deepest, []byte("package changed\n")))
	b.Logf("%d .go files; changed %s (depth %d)", len(files), deepest, strings.Count(deepest, "/")+1)
	return path, before, res.Commit.String()
}

func openStore(b *testing.B, path string) *layerfs.Store {
	st, err := layerfs.Open(path, layerfs.Options{Durability: store.Normal})
	if err != nil {
		b.Fatal(err)
	}
	return st
}

// BenchmarkBlame1000Lines: blame of a 1,000-line file on a branch of the Go
// tree after 100 edit Commits by 10 origins (each Commit replaces, inserts
// or deletes 1 to 5 lines). Owners are checked against a model before
// timing. Bar: under 20 ms.
func BenchmarkBlame1000Lines(b *testing.B) {
	path := copyGoTree(b)
	st := openStore(b, path)
	defer st.Close()
	owners := blameHistory(b, st)
	b.Run("warm", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			blameOnce(b, st, owners)
		}
		reportMs(b)
	})
	b.Run("cold", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			st := openStore(b, path)
			b.StartTimer()
			blameOnce(b, st, owners)
			b.StopTimer()
			st.Close()
			b.StartTimer()
		}
		reportMs(b)
	})
}

func blameOnce(b *testing.B, st *layerfs.Store, owners []string) {
	res, err := st.Blame("blame", "src/blame.txt")
	if err != nil {
		b.Fatal(err)
	}
	line := 0
	for _, r := range res.Ranges {
		for n := r.Start; n <= r.End; n++ {
			if line >= len(owners) || r.Owner != owners[line] {
				b.Fatalf("line %d owned by %s, want %s", n, r.Owner, owners[min(line, len(owners)-1)])
			}
			line++
		}
	}
	if line != len(owners) {
		b.Fatalf("blame covers %d lines, want %d", line, len(owners))
	}
}

// blameHistory writes a 1,000-line file on a new branch "blame", then makes
// 100 edit Commits by 10 origins, and returns the owner of each line as a
// model says.
func blameHistory(b *testing.B, st *layerfs.Store) []string {
	if _, err := st.Fork("blame", "main"); err != nil {
		b.Fatal(err)
	}
	f, err := st.FS("blame")
	if err != nil {
		b.Fatal(err)
	}
	lines, owners := make([]string, 1000), make([]string, 1000)
	for i := range lines {
		lines[i] = fmt.Sprintf("original line %d\n", i)
		owners[i] = "operation:creator"
	}
	mustCommit(b)(f.Write("src/blame.txt", []byte(strings.Join(lines, "")), layerfs.Call{ID: "creator"}))
	r := rand.New(rand.NewSource(5))
	for c := 0; c < 100; c++ {
		origin := fmt.Sprintf("agent-%d", c%10)
		mustCommit(b)(f.Batch(func(bt *layerfs.Batch) error {
			for k := 0; k < 1+r.Intn(5); k++ {
				at := r.Intn(len(lines))
				old, next := lines[at], fmt.Sprintf("edit %d.%d\n", c, k)
				switch r.Intn(3) {
				case 0: // replace a line
					lines[at], owners[at] = next, "operation:"+origin
				case 1: // insert a line after it
					lines = append(lines[:at+1], append([]string{next}, lines[at+1:]...)...)
					owners = append(owners[:at+1], append([]string{"operation:" + origin}, owners[at+1:]...)...)
					next = old + next
				case 2: // delete it
					lines = append(lines[:at], lines[at+1:]...)
					owners = append(owners[:at], owners[at+1:]...)
					next = ""
				}
				if err := bt.Edit("src/blame.txt", old, next, false); err != nil {
					return err
				}
			}
			return nil
		}, layerfs.Call{ID: origin}))
	}
	return owners
}
