package layerfs

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/publish"
	"github.com/layerfs/layerfs/store"
)

// Concurrency between processes, as agents make it: the test binary runs
// itself again as helper processes (TestHelperProcess with a role in
// $LAYERFS_TEST_HELPER) that share nothing with the test but the Store file.
// Each helper opens the Store, says "ready", waits for one line on stdin so
// that all of them start together, does its calls, and prints one "result"
// line of JSON per call.

const helperEnv = "LAYERFS_TEST_HELPER"

// TestHelperProcess is a helper when started by startHelpers; otherwise it
// does nothing.
func TestHelperProcess(t *testing.T) {
	role := os.Getenv(helperEnv)
	if role == "" {
		t.Skip("a helper process for the concurrency tests")
	}
	st, err := Open(os.Getenv("LAYERFS_TEST_STORE"), Options{Durability: store.Normal})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	f, err := st.FS("main")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("ready")
	bufio.NewReader(os.Stdin).ReadString('\n')
	worker, _ := strconv.Atoi(os.Getenv("LAYERFS_TEST_WORKER"))
	switch role {
	case "writer":
		n, _ := strconv.Atoi(os.Getenv("LAYERFS_TEST_COUNT"))
		helperWrites(t, f, worker, n)
	case "editor":
		base, err := object.Parse(os.Getenv("LAYERFS_TEST_BASE"))
		if err != nil {
			t.Fatal(err)
		}
		res, err := f.Edit("race.txt", "base", fmt.Sprintf("editor %d", worker), false, Call{Base: base, ID: fmt.Sprintf("editor-%d", worker)})
		if err != nil {
			t.Fatal(err)
		}
		printResult(res)
	default:
		t.Fatalf("unknown helper role %q", role)
	}
}

// helperWrites makes n writes, each its own Commit, to files of its own.
func helperWrites(t *testing.T, f *FS, worker, n int) {
	for k := 0; k < n; k++ {
		res, err := f.Write(workerFile(worker, k), workerContent(worker, k), Call{ID: fmt.Sprintf("w%d-%d", worker, k)})
		if err != nil {
			t.Fatalf("write %d: %v", k, err)
		}
		printResult(res)
	}
}

func workerFile(worker, k int) string { return fmt.Sprintf("w%d/f%03d.txt", worker, k) }

func workerContent(worker, k int) []byte {
	return []byte(fmt.Sprintf("worker %d wrote file %d\n", worker, k))
}

// helperResult is a Result as a helper prints it.
type helperResult struct {
	Status string    `json:"status"`
	Commit object.ID `json:"commit"`
	Head   object.ID `json:"head"`
	Paths  []string  `json:"paths"`
}

func printResult(res *Result) {
	b, _ := json.Marshal(helperResult{res.Status.String(), res.Commit, res.Head, res.Paths})
	fmt.Printf("result %s\n", b)
}

// helper is one running helper process.
type helper struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
	log   strings.Builder // everything it printed
}

// startHelpers starts n helpers in role, each with env(i) added to its
// environment, and returns once all of them have opened the Store.
func startHelpers(t *testing.T, role, storePath string, n int, env func(i int) []string) []*helper {
	t.Helper()
	var hs []*helper
	for i := 0; i < n; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), helperEnv+"="+role, "LAYERFS_TEST_STORE="+storePath, "LAYERFS_TEST_WORKER="+strconv.Itoa(i))
		cmd.Env = append(cmd.Env, env(i)...)
		cmd.Stderr = os.Stderr
		h := &helper{cmd: cmd}
		var err error
		if h.stdin, err = cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		h.out = bufio.NewScanner(out)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		hs = append(hs, h)
	}
	for i, h := range hs {
		if !h.next("ready") {
			t.Fatalf("helper %d ended before it was ready:\n%s", i, h.finish())
		}
	}
	return hs
}

// next reads lines until one starts with prefix.
func (h *helper) next(prefix string) bool {
	for h.out.Scan() {
		line := h.out.Text()
		h.log.WriteString(line + "\n")
		if strings.HasPrefix(line, prefix) {
			return true
		}
	}
	return false
}

// finish reads the rest of the helper's output and waits for it to exit.
func (h *helper) finish() string {
	for h.next("\x00") {
	}
	if err := h.cmd.Wait(); err != nil {
		h.log.WriteString("exit: " + err.Error() + "\n")
	}
	return h.log.String()
}

// release starts every helper at once and returns each one's results.
func release(t *testing.T, hs []*helper) [][]helperResult {
	t.Helper()
	for _, h := range hs {
		fmt.Fprintln(h.stdin, "go")
	}
	out := make([][]helperResult, len(hs))
	for i, h := range hs {
		log := h.finish()
		if h.cmd.ProcessState.ExitCode() != 0 {
			t.Fatalf("helper %d failed:\n%s", i, log)
		}
		for _, line := range strings.Split(log, "\n") {
			if js, ok := strings.CutPrefix(line, "result "); ok {
				var r helperResult
				if err := json.Unmarshal([]byte(js), &r); err != nil {
					t.Fatalf("helper %d: %q: %v", i, line, err)
				}
				out[i] = append(out[i], r)
			}
		}
	}
	return out
}

// concurrentWrites is how many processes write and how many writes each
// makes: the full figure, or less under -short or the race detector (which
// slows every process about tenfold).
func concurrentWrites() (procs, writes int) {
	if testing.Short() || raceEnabled {
		return 8, 25
	}
	return 8, 200
}

// TestConcurrentProcessWrites: 8 processes each make 200 writes to files of
// their own on main at the same time. Every write lands as its own Commit
// (1,600 on top of init, along first parents), nothing is lost, and fsck is
// clean (newProject's cleanup).
func TestConcurrentProcessWrites(t *testing.T) {
	procs, writes := concurrentWrites()
	st, f := newProject(t)
	initCommit := f.Base()
	start := time.Now()
	hs := startHelpers(t, "writer", st.Backend().Path(), procs, func(int) []string {
		return []string{"LAYERFS_TEST_COUNT=" + strconv.Itoa(writes)}
	})
	results := release(t, hs)
	elapsed := time.Since(start)
	for w, rs := range results {
		if len(rs) != writes {
			t.Fatalf("worker %d reported %d results, want %d", w, len(rs), writes)
		}
		for k, r := range rs {
			if r.Status != publish.Committed.String() {
				t.Fatalf("worker %d write %d: %s %v", w, k, r.Status, r.Paths)
			}
		}
	}
	log, err := st.Log("main", 0)
	if err != nil {
		t.Fatal(err)
	}
	total := procs * writes
	t.Logf("%d processes x %d writes: %d commits in %v (%.0f/s), %d worker switches in history",
		procs, writes, len(log)-1, elapsed.Round(time.Millisecond), float64(len(log)-1)/elapsed.Seconds(), switches(log))
	if len(log) != total+1 || log[total].Commit != initCommit {
		t.Fatalf("history has %d commits above init, want %d", len(log)-1, total)
	}
	checkOneWritePerCommit(t, log[:total], procs, writes)
	if switches(log[:total]) < procs {
		t.Errorf("the writers did not overlap: history has %d switches between workers", switches(log[:total]))
	}
	for w := 0; w < procs; w++ {
		for k := 0; k < writes; k++ {
			if got := mustRead(t, f, workerFile(w, k)); got != string(workerContent(w, k)) {
				t.Fatalf("%s = %q", workerFile(w, k), got)
			}
		}
	}
}

// checkOneWritePerCommit: each Commit adds exactly the one file its origin
// wrote, and every write appears once.
func checkOneWritePerCommit(t *testing.T, log []LogEntry, procs, writes int) {
	t.Helper()
	seen := map[string]bool{}
	for _, e := range log {
		var w, k int
		if _, err := fmt.Sscanf(e.Origin, "operation:w%d-%d", &w, &k); err != nil {
			t.Fatalf("commit %s: origin %q", e.Commit.Short(), e.Origin)
		}
		if len(e.Changes) != 1 || e.Changes[0].Path != workerFile(w, k) || e.Changes[0].Kind != publish.Added {
			t.Fatalf("commit %s by %s changed %+v", e.Commit.Short(), e.Origin, e.Changes)
		}
		if seen[e.Origin] {
			t.Fatalf("%s landed twice", e.Origin)
		}
		seen[e.Origin] = true
	}
	if len(seen) != procs*writes {
		t.Fatalf("%d distinct writes landed, want %d", len(seen), procs*writes)
	}
}

// switches counts adjacent commits made by different workers.
func switches(log []LogEntry) int {
	n := 0
	for i := 1; i < len(log); i++ {
		a, _, _ := strings.Cut(log[i-1].Origin, "-")
		b, _, _ := strings.Cut(log[i].Origin, "-")
		if a != b {
			n++
		}
	}
	return n
}

// TestSameFileRaceBetweenProcesses: two processes edit one file from the
// same base at the same time. Exactly one lands; the other gets Conflict
// naming the path and the head it met (the winner's commit), and the branch
// holds the winner's content. Several rounds, so either side may win.
func TestSameFileRaceBetweenProcesses(t *testing.T) {
	st, f := newProject(t)
	rounds := 4
	if testing.Short() || raceEnabled {
		rounds = 2 // each round starts two processes, slow under -race
	}
	for round := 0; round < rounds; round++ {
		res := expect(t, publish.Committed)(f.Write("race.txt", []byte(fmt.Sprintf("round %d base\n", round))))
		base := res.Commit
		hs := startHelpers(t, "editor", st.Backend().Path(), 2, func(int) []string {
			return []string{"LAYERFS_TEST_BASE=" + base.String()}
		})
		results := release(t, hs)
		win, lose := results[0][0], results[1][0]
		winner := 0
		if lose.Status == publish.Committed.String() {
			win, lose, winner = lose, win, 1
		}
		if win.Status != publish.Committed.String() || win.Head != base {
			t.Fatalf("round %d: no winner on the base: %+v %+v", round, win, lose)
		}
		if lose.Status != publish.Conflict.String() || len(lose.Paths) != 1 || lose.Paths[0] != "race.txt" || lose.Head != win.Commit {
			t.Fatalf("round %d: loser %+v, want Conflict on race.txt at %s", round, lose, win.Commit.Short())
		}
		if b, _ := st.Backend().Branch("main"); b.Head != win.Commit {
			t.Fatalf("round %d: main is at %s, want the winner's %s", round, b.Head.Short(), win.Commit.Short())
		}
		if got, want := mustRead(t, f, "race.txt"), fmt.Sprintf("round %d editor %d\n", round, winner); got != want {
			t.Fatalf("round %d: race.txt = %q, want %q", round, got, want)
		}
		t.Logf("round %d: editor %d won", round, winner)
	}
}
