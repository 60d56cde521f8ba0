package store

import (
	"math/rand"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// BenchmarkStageFlushRandom32MiB stores 32 MiB of fresh random chunks
// (stored raw) through a Stage, as capturing a new big file does, in
// Normal durability. cpu-ms/op is the process's CPU time, the
// checkpointer's included.
func BenchmarkStageFlushRandom32MiB(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "s.layerfs"), Options{Create: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	rng := rand.New(rand.NewSource(1))
	const size, chunk = 32 << 20, 16 << 10
	var cpu time.Duration
	b.SetBytes(size)
	for b.Loop() {
		b.StopTimer()
		chunks := make([][]byte, size/chunk)
		for i := range chunks {
			chunks[i] = make([]byte, chunk)
			rng.Read(chunks[i])
		}
		before := cpuTime()
		b.StartTimer()
		st := s.NewStage()
		for i := 0; i < len(chunks); i += 16 {
			if _, err := st.PutChunks(chunks[i : i+16]); err != nil {
				b.Fatal(err)
			}
		}
		if err := st.Flush(); err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime() - before
	}
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
