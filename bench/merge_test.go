package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/layerfs/layerfs"
	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/publish"
)

// BenchmarkPublishMergeMovedHead: a one-line edit made against a base that
// head has since moved past by 100 Commits — one of which edited another
// line of the same file — lands merged line by line, in Go's tree. Bar:
// under 20 ms per publish.
func BenchmarkPublishMergeMovedHead(b *testing.B) {
	st, err := layerfs.Open(copyGoTree(b), layerfs.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	const target = "src/fmt/print.go"
	other, _ := st.FS("main")
	ours, _ := st.FS("main")
	var total time.Duration
	headLine := "package fmt\n" // the line head edits, as it stands
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		base := other.Base()
		if _, err := other.Read(target); err != nil {
			b.Fatal(err)
		}
		base = other.Base()
		for k := 0; k < 99; k++ {
			if _, err := other.Write(fmt.Sprintf("bench/moved/%d/%d.txt", i, k), []byte("x\n")); err != nil {
				b.Fatal(err)
			}
		}
		next := fmt.Sprintf("package fmt // head %d\n", i)
		if _, err := other.Edit(target, headLine, next, false); err != nil {
			b.Fatal(err)
		}
		headLine = next
		ours.SetBase(base)
		data, err := readAt(st, base, target)
		if err != nil {
			b.Fatal(err)
		}
		edited := strings.Replace(data, "func Println(", fmt.Sprintf("// ours %d\nfunc Println(", i), 1)
		if edited == data {
			b.Fatal("the edit changed nothing")
		}
		b.StartTimer()
		start := time.Now()
		res, err := ours.Write(target, []byte(edited), layerfs.Call{Base: base})
		total += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if res.Status != publish.Committed || len(res.Merged) != 1 {
			b.Fatalf("publish: %s, merged %v", res.Status, res.Merged)
		}
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/publish")
}

func readAt(st *layerfs.Store, commit interface{ String() string }, path string) (string, error) {
	f, err := st.FS(commit.String())
	if err != nil {
		return "", err
	}
	data, err := f.Read(path)
	return string(data), err
}

// BenchmarkMergeThroughput16Workspaces: 16 Workspaces on one branch each
// edit one random line of a shared 1,000-line file and commit, all at
// once; a conflict discards and tries again. Reports Commits/s and the
// conflict rate.
func BenchmarkMergeThroughput16Workspaces(b *testing.B) {
	wsNeedRoot(b)
	lines := make([]string, 1000)
	for i := range lines {
		lines[i] = fmt.Sprintf("line %d\n", i)
	}
	e := wsStart(b, wsStoreOf(b, map[string][]byte{"shared.txt": []byte(strings.Join(lines, ""))}))
	ws := make([]api.Workspace, 16)
	for i := range ws {
		ws[i] = e.create(b)
	}
	var commits, conflicts atomic.Int64
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Add(1)
		go func(i int, id string) {
			defer wg.Done()
			for k := 0; k < b.N; k++ {
				line := (i*7919 + k*104729) % 1000
				script := fmt.Sprintf("sed -i '%ds/.*/ws %d edit %d/' shared.txt", line+1, i, k)
				for {
					if _, err := e.c.Exec(ctx, id, api.ExecRequest{Argv: []string{"sh", "-c", script}}); err != nil {
						b.Error(err)
						return
					}
					res, err := e.c.Commit(ctx, id, api.CommitRequest{})
					if err != nil {
						b.Error(err)
						return
					}
					if res.Status != api.StatusConflict {
						commits.Add(1)
						break
					}
					conflicts.Add(1)
					if _, err := e.c.Discard(ctx, id, false); err != nil {
						b.Error(err)
						return
					}
				}
			}
		}(i, w.ID)
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	for _, w := range ws {
		e.end(b, w.ID)
	}
	attempts := commits.Load() + conflicts.Load()
	b.ReportMetric(float64(commits.Load())/elapsed.Seconds(), "commits/s")
	b.ReportMetric(100*float64(conflicts.Load())/float64(attempts), "conflict-%")
}
