package bench

import (
	"bufio"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/layerfs/layerfs"
	"github.com/layerfs/layerfs/publish"
	"github.com/layerfs/layerfs/store"
)

// Commit throughput: small-file writes on a branch of Go's source tree, each
// one Commit through the publish gate, in Normal durability. Each op
// replaces one existing file of the tree (a different one each time, spread
// over the whole tree) with 1 KiB of new text. Bar: at least 1,000
// Commits/s in one process.
//
//	go test -run '^$' -bench 'Commits' -benchtime 3000x ./bench/

func BenchmarkCommits1Process(b *testing.B)   { benchCommits(b, 1) }
func BenchmarkCommits2Processes(b *testing.B) { benchCommits(b, 2) }
func BenchmarkCommits8Processes(b *testing.B) { benchCommits(b, 8) }

// commitFixture is a private copy of the Go-tree Store with a fresh branch
// and the files the writers replace.
type commitFixture struct {
	store, branch string
	files         []string
}

func newCommitFixture(b *testing.B) *commitFixture {
	b.Helper()
	fx := &commitFixture{store: copyGoTree(b), branch: "bench"}
	st, err := layerfs.Open(fx.store, layerfs.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Fork(fx.branch, "main"); err != nil {
		b.Fatal(err)
	}
	f, err := st.FS(fx.branch)
	if err != nil {
		b.Fatal(err)
	}
	if fx.files, err = f.Glob("src/**/*.go"); err != nil {
		b.Fatal(err)
	}
	rand.New(rand.NewSource(1)).Shuffle(len(fx.files), func(i, j int) { fx.files[i], fx.files[j] = fx.files[j], fx.files[i] })
	return fx
}

// smallFile is the content of write i: 1 KiB of text, unique per i.
func smallFile(worker, i int) []byte {
	head := fmt.Sprintf("// worker %d, write %d\n", worker, i)
	return []byte(head + strings.Repeat("x", 1023-len(head)) + "\n")
}

func benchCommits(b *testing.B, procs int) {
	fx := newCommitFixture(b)
	var cpu time.Duration
	b.ResetTimer()
	if procs == 1 {
		st, f := openWriter(b, fx.store, fx.branch)
		before := cpuTime()
		writeCommits(b, f, fx.files, 0, 1, b.N)
		cpu = cpuTime() - before
		st.Close()
	} else {
		cpu = runWriterProcesses(b, fx, procs)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/commit")
	checkCommits(b, fx, b.N)
}

// cpuTime is the user and system CPU time this process has used. Per
// commit it is a steadier figure than wall time on a shared machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func openWriter(tb testing.TB, path, branch string) (*layerfs.Store, *layerfs.FS) {
	tb.Helper()
	st, err := layerfs.Open(path, layerfs.Options{Durability: store.Normal})
	if err != nil {
		tb.Fatal(err)
	}
	f, err := st.FS(branch)
	if err != nil {
		tb.Fatal(err)
	}
	return st, f
}

// writeCommits makes n writes on f's branch: worker w of procs takes files
// w, w+procs, ... so no two workers touch one file.
func writeCommits(tb testing.TB, f *layerfs.FS, files []string, w, procs, n int) {
	mine := len(files) / procs
	for i := 0; i < n; i++ {
		p := files[w+procs*(i%mine)]
		res, err := f.Write(p, smallFile(w, i), layerfs.Call{ID: fmt.Sprintf("w%d-%d", w, i)})
		if err != nil {
			tb.Fatal(err)
		}
		if res.Status != publish.Committed {
			tb.Fatalf("write %d of %s: %s", i, p, res.Status)
		}
	}
}

// runWriterProcesses starts procs copies of this test binary as writers,
// lets them open the Store, then times them from one start signal until the
// last one is done. It returns the CPU time the writers used, from start to
// exit.
func runWriterProcesses(b *testing.B, fx *commitFixture, procs int) time.Duration {
	b.StopTimer()
	list := filepath.Join(b.TempDir(), "files")
	if err := os.WriteFile(list, []byte(strings.Join(fx.files, "\n")), 0o644); err != nil {
		b.Fatal(err)
	}
	var ws []*writerProc
	for w := 0; w < procs; w++ {
		n := b.N / procs
		if w < b.N%procs {
			n++
		}
		wp, err := startWriter(fx, list, w, procs, n)
		if err != nil {
			b.Fatal(err)
		}
		ws = append(ws, wp)
	}
	for _, wp := range ws {
		wp.expect(b, "ready")
	}
	b.StartTimer()
	for _, wp := range ws {
		fmt.Fprintln(wp.stdin, "go")
	}
	var cpu time.Duration
	for _, wp := range ws {
		wp.expect(b, "done")
		if err := wp.cmd.Wait(); err != nil {
			b.Fatalf("writer: %v: %s", err, wp.stderr)
		}
		cpu += wp.cmd.ProcessState.UserTime() + wp.cmd.ProcessState.SystemTime()
	}
	b.StopTimer()
	return cpu
}

type writerProc struct {
	cmd    *exec.Cmd
	stdin  *os.File
	out    *bufio.Scanner
	stderr *strings.Builder
}

func startWriter(fx *commitFixture, list string, w, procs, n int) (*writerProc, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestBenchWriterProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "LAYERFS_BENCH_WRITER=1", "LAYERFS_BENCH_STORE="+fx.store,
		"LAYERFS_BENCH_BRANCH="+fx.branch, "LAYERFS_BENCH_FILES="+list,
		"LAYERFS_BENCH_WORKER="+strconv.Itoa(w), "LAYERFS_BENCH_PROCS="+strconv.Itoa(procs),
		"LAYERFS_BENCH_N="+strconv.Itoa(n))
	r, wr, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdin = r
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	wp := &writerProc{cmd: cmd, stdin: wr, out: bufio.NewScanner(out), stderr: &strings.Builder{}}
	cmd.Stderr = wp.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r.Close()
	return wp, nil
}

// expect reads stdout lines until one starts with word.
func (wp *writerProc) expect(b *testing.B, word string) {
	for wp.out.Scan() {
		if strings.HasPrefix(wp.out.Text(), word) {
			return
		}
	}
	wp.cmd.Wait()
	b.Fatalf("writer ended before %q: %s", word, wp.stderr)
}

// TestBenchWriterProcess is a writer when started by runWriterProcesses;
// otherwise it does nothing.
func TestBenchWriterProcess(t *testing.T) {
	if os.Getenv("LAYERFS_BENCH_WRITER") != "1" {
		t.Skip("a helper process for the Commits benchmarks")
	}
	env := func(k string) int { n, _ := strconv.Atoi(os.Getenv(k)); return n }
	list, err := os.ReadFile(os.Getenv("LAYERFS_BENCH_FILES"))
	if err != nil {
		t.Fatal(err)
	}
	files := strings.Split(string(list), "\n")
	st, f := openWriter(t, os.Getenv("LAYERFS_BENCH_STORE"), os.Getenv("LAYERFS_BENCH_BRANCH"))
	defer st.Close()
	fmt.Println("ready")
	bufio.NewReader(os.Stdin).ReadString('\n')
	start := time.Now()
	writeCommits(t, f, files, env("LAYERFS_BENCH_WORKER"), env("LAYERFS_BENCH_PROCS"), env("LAYERFS_BENCH_N"))
	fmt.Println("done", time.Since(start).Nanoseconds())
}

// checkCommits verifies that every write landed as its own Commit.
func checkCommits(b *testing.B, fx *commitFixture, n int) {
	st, err := layerfs.Open(fx.store, layerfs.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	r, err := st.Backend().Resolve(fx.branch + "~" + strconv.Itoa(n))
	if err != nil {
		b.Fatalf("after %d writes: %v", n, err)
	}
	m, _ := st.Backend().Resolve("main")
	if r.Commit != m.Commit {
		b.Fatalf("%s~%d is not where the branch started: some writes did not land", fx.branch, n)
	}
}
