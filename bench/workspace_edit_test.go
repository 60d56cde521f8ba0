package bench

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Lifecycles of a Workspace around a 32 MiB file of random bytes (the
// worst case for compression), each one create, exec `sh -c`, commit,
// end, timed through the socket API as an agent sees them. Bars (medians):
//
//	edit:    overwrite 10 bytes, under 10 ms; 16 Commits add at most 0.25 MiB
//	cold:    create a new 32 MiB file, under 160 ms
//	read:    read the file sequentially, cold (a fresh daemon, so neither
//	         its chunk cache nor the kernel's page cache holds it), under 110 ms
//	prepend: prepend 10 bytes by copy-and-rename, under 230 ms and at most
//	         0.05 MiB of growth
//
//	go test -run '^$' -bench 'WorkspaceBigFile' -benchtime 16x ./bench/

const wsBigSize = 32 << 20

// wsBigStore is a private Store whose main holds big.bin (32 MiB of random
// bytes) and a README.
func wsBigStore(b *testing.B) string {
	data := make([]byte, wsBigSize)
	rand.New(rand.NewSource(5)).Read(data)
	return wsStoreOf(b, map[string][]byte{"big.bin": data, "README": []byte("bench\n")})
}

func BenchmarkWorkspaceBigFileEdit(b *testing.B) {
	wsNeedRoot(b)
	e := wsStart(b, wsBigStore(b))
	e.lifecycle(b, "true") // warm-up: the first view of the file
	e.phases = nil         // not one of the edits' phases
	var life samples
	before := e.stored(b)
	b.ResetTimer()
	// Each edit writes bytes no earlier edit wrote (a count), at one of 16
	// places: an edit that rewrote bytes already there would commit only
	// an mtime, and store nothing.
	edits := 0
	script := func(i int) string {
		edits++
		off := (i%16)*(wsBigSize/16) + 4321
		return fmt.Sprintf("printf %010d | dd of=big.bin bs=10 count=1 seek=%d oflag=seek_bytes conv=notrunc status=none", edits, off)
	}
	// CPU time over the loop: the process's (the daemon's, the client's,
	// and the kernel's work on their behalf), and the commands'. On two
	// cores a lifecycle that needs more than two of its own milliseconds
	// of CPU per millisecond waits for the cores, not for anything else.
	cpu, cmds := cpuTime(), childCPUTime()
	for i := 0; i < b.N; i++ {
		life.time(func() { e.lifecycle(b, script(i)) })
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/1000/float64(b.N), "cpu-ms/lifecycle")
	b.ReportMetric(float64((childCPUTime()-cmds).Microseconds())/1000/float64(b.N), "cmd-cpu-ms/lifecycle")
	life.report(b, "lifecycle-ms")
	e.logPhases(b)
	b.ReportMetric(float64(e.stored(b)-before)/float64(b.N)*16/(1<<20), "MiB-stored/16commits")
	// 0 if the daemon has no volume that clones files (no mkfs.xfs, say):
	// then every edit copies the 32 MiB up whole, and the figures above
	// measure that instead.
	b.ReportMetric(float64(e.metric(b, "layerfs_data_files")), "data-files")
	// The same edit when the agent pauses between commands, as agents do
	// to think: by then the commit's read-ahead of the new version
	// (sessions/warm.go) is done, and the copy-up reads cached pages.
	// The whole lifecycle after such a pause is the latency an agent sees
	// when it acts on a settled daemon; the loop above also pays, on two
	// cores, for the work each lifecycle leaves the daemon to do after it.
	var paused, pausedLife samples
	for i := 0; i < 8; i++ {
		time.Sleep(300 * time.Millisecond)
		pausedLife.time(func() {
			id := e.create(b).ID
			paused.time(func() { e.sh(b, id, script(i)) })
			e.commit(b, id)
			e.end(b, id)
		})
	}
	paused.report(b, "exec-after-pause-ms")
	pausedLife.report(b, "lifecycle-after-pause-ms")
	// The same command in a plain overlayfs over ext4: the copy-up of the
	// whole file that any overlay pays before the 10-byte write.
	plain := plainOverlayExec(b, b.N, script)
	plain.report(b, "plain-overlay-exec-ms")
	b.ReportMetric(e.phases["exec"].ms()/plain.ms(), "exec/plain-overlay")
}

func BenchmarkWorkspaceBigFileColdCreate(b *testing.B) {
	wsNeedRoot(b)
	e := wsStart(b, wsStoreOf(b, map[string][]byte{"README": []byte("bench\n")}))
	// Fresh random content for every iteration, made on the host: the
	// command copies it in, so the timing is the Workspace's, not
	// /dev/urandom's.
	src := filepath.Join(wsTempDir(b), "rand")
	rng := rand.New(rand.NewSource(6))
	data := make([]byte, wsBigSize)
	var life samples
	// The process's CPU time over the loop, less the making of the
	// content on this (locked) thread: the daemon's, checkpoints
	// included, whenever they run.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var making time.Duration
	start := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		t := threadCPUTime()
		rng.Read(data)
		if err := os.WriteFile(src, data, 0o644); err != nil {
			b.Fatal(err)
		}
		making += threadCPUTime() - t
		b.StartTimer()
		script := fmt.Sprintf("cp %s new%d.bin", src, i)
		life.time(func() { e.lifecycle(b, script) })
	}
	b.StopTimer()
	cpu := cpuTime() - start - making
	life.report(b, "lifecycle-ms")
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/lifecycle")
	e.logPhases(b)
}

// childCPUTime is the user and system CPU time of the process's children
// that have exited and been waited for: the commands run in Workspaces.
func childCPUTime() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_CHILDREN, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// threadCPUTime is the user and system CPU time the calling thread has
// used.
func threadCPUTime() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_THREAD, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkWorkspaceBigFileRead(b *testing.B) {
	wsNeedRoot(b)
	path := wsBigStore(b)
	var read samples
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		e := wsStart(b, path) // a fresh daemon: nothing cached
		id := e.create(b).ID
		b.StartTimer()
		read.time(func() { e.sh(b, id, "cat big.bin >/dev/null") })
		b.StopTimer()
		e.end(b, id)
		e.close(b)
		b.StartTimer()
	}
	b.StopTimer()
	read.report(b, "read-ms")
}

func BenchmarkWorkspaceBigFilePrepend(b *testing.B) {
	wsNeedRoot(b)
	e := wsStart(b, wsBigStore(b))
	e.lifecycle(b, "true")
	var life samples
	var grown int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		before := e.stored(b)
		life.time(func() {
			e.lifecycle(b, "{ printf 0123456789; cat big.bin; } >big.tmp && mv big.tmp big.bin")
		})
		grown += e.stored(b) - before
	}
	b.StopTimer()
	life.report(b, "lifecycle-ms")
	e.logPhases(b)
	b.ReportMetric(float64(grown)/float64(b.N)/(1<<20), "MiB-stored/op")
}
