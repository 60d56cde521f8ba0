package publish

import (
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/layerfs/layerfs/store"
)

// BenchmarkCaptureNewBigFile captures and publishes an upperdir holding
// one new 32 MiB file of random bytes, as a Workspace's "cold create"
// commit does, into a Store in Normal durability on /var/tmp (BENCH_WORK).
// cpu-ms/op is the process's CPU time over the loop, less the making of
// the files: the checkpointer's included, whenever it runs.
//
//	go test -run '^$' -bench CaptureNewBigFile -benchtime 16x ./publish/
func BenchmarkCaptureNewBigFile(b *testing.B) {
	dir := os.Getenv("BENCH_WORK")
	if dir == "" {
		dir = "/var/tmp"
	}
	dir, err := os.MkdirTemp(dir, "layerfs-capture-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := store.Open(filepath.Join(dir, "s.layerfs"), store.Options{Create: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	base := emptyMain(b, s)
	rng := rand.New(rand.NewSource(6))
	data := make([]byte, 32<<20)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var capture, prepare, making time.Duration
	start := processCPU()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		t := threadCPU()
		upper := filepath.Join(dir, "upper", string(rune('a'+i%26))+time.Now().Format("150405.000000"))
		rng.Read(data)
		if err := os.MkdirAll(upper, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(upper, "new.bin"), data, 0o644); err != nil {
			b.Fatal(err)
		}
		making += threadCPU() - t
		b.StartTimer()
		c, err := CaptureUpper(s, Upper{Dir: upper, Base: base})
		if err != nil {
			b.Fatal(err)
		}
		res, err := Publish(s, "main", c.Changes, c.Content, Meta{Origin: "operation:bench", Message: "bench"})
		if err != nil || res.Status != Committed {
			b.Fatalf("publish: %v %v", res, err)
		}
		base = res.Commit
		capture += c.Duration
		prepare += res.Prepare
	}
	b.StopTimer()
	cpu := processCPU() - start - making
	n := float64(b.N)
	b.ReportMetric(float64(capture.Microseconds())/1000/n, "capture-ms")
	b.ReportMetric(float64(prepare.Microseconds())/1000/n, "prepare-ms")
	b.ReportMetric(float64(cpu.Microseconds())/1000/n, "cpu-ms/op")
}

func processCPU() time.Duration { return rusage(syscall.RUSAGE_SELF) }
func threadCPU() time.Duration  { return rusage(1) } // RUSAGE_THREAD

func rusage(who int) time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(who, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
