package bench

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/layerfs/layerfs/sessions"
)

// What a live Workspace costs: 256 idle Workspaces of Go's tree at once
// (the default cap), then all ended. Reported per Workspace: the daemon's
// resident memory (RSS after - before, over 256, after a GC), its holder
// process's proportional set size, the disk its directories take in the
// state directory (upper and work directories, record, mount point), and
// the Store's growth (leases). Also the median create with up to 256 live,
// and the median end. Targets: under 1 MiB of daemon memory and 64 KiB of
// disk per Workspace.
//
//	go test -run '^$' -bench 'WorkspaceScale256' -benchtime 1x ./bench/
func BenchmarkWorkspaceScale256(b *testing.B) {
	wsNeedRoot(b)
	path := wsPrivateCopy(b, wsGorootStore(b))
	e := wsStart(b, path)
	e.end(b, e.create(b).ID)
	const n = sessions.DefaultMaxWorkspaces
	var create, end samples
	var rss, pss, disk, store float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		e.waitDrained(b)
		rss0, disk0, store0 := wsRSS(b), wsDiskUnder(b, e.stateDir), wsStoreBytes(path)
		b.StartTimer()
		ids := make([]string, n)
		for j := range ids {
			create.time(func() { ids[j] = e.create(b).ID })
		}
		b.StopTimer()
		rss += float64(wsRSS(b) - rss0)
		pss += float64(wsHolderPSS(b))
		disk += float64(wsDiskUnder(b, e.stateDir) - disk0)
		store += float64(wsStoreBytes(path) - store0)
		b.StartTimer()
		for _, id := range ids {
			end.time(func() { e.end(b, id) })
		}
	}
	b.StopTimer()
	per := float64(b.N * n * 1024)
	b.ReportMetric(rss/per, "daemon-RSS-KiB/ws")
	b.ReportMetric(pss/per, "holder-PSS-KiB/ws")
	b.ReportMetric(disk/per, "disk-KiB/ws")
	b.ReportMetric(store/per, "store-KiB/ws")
	create.report(b, "create-ms")
	end.report(b, "end-ms")
}

// wsRSS is this process's resident set after a collection.
func wsRSS(b *testing.B) int64 {
	runtime.GC()
	debug.FreeOSMemory()
	return wsStatusKiB(b, "/proc/self/status", "VmRSS:") << 10
}

func wsStatusKiB(b *testing.B, file, key string) int64 {
	data, err := os.ReadFile(file)
	if err != nil {
		b.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), key); ok {
			f := strings.Fields(rest)
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				b.Fatalf("%s %s: %v", file, key, err)
			}
			return n
		}
	}
	b.Fatalf("%s: no %s", file, key)
	return 0
}

// wsHolderPSS sums the proportional set size of this process's namespace
// holders (its children running the holder), in bytes.
func wsHolderPSS(b *testing.B) int64 {
	self := strconv.Itoa(os.Getpid())
	procs, _ := filepath.Glob("/proc/[0-9]*")
	var total int64
	for _, p := range procs {
		stat, err := os.ReadFile(p + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 2 || f[1] != self {
			continue
		}
		if cmd, _ := os.ReadFile(p + "/cmdline"); !bytes.Contains(cmd, []byte(sessions.HolderArg)) {
			continue
		}
		total += wsStatusKiB(b, p+"/smaps_rollup", "Pss:") << 10
	}
	return total
}

// wsDiskUnder is the disk the state directory's files take, the
// Workspaces' volume (ws/) included, without crossing into other mounts
// (the Store's FUSE mount, the overlays) or counting the volume's image
// and its data layer.
func wsDiskUnder(b *testing.B, dir string) int64 {
	var root, vol syscall.Stat_t
	if err := syscall.Stat(dir, &root); err != nil {
		b.Fatal(err)
	}
	if err := syscall.Stat(filepath.Join(dir, "ws"), &vol); err != nil {
		b.Fatal(err)
	}
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // removed meanwhile (background removal)
		}
		switch p {
		case filepath.Join(dir, "ws.img"):
			return nil
		case filepath.Join(dir, "ws", ".data"):
			return fs.SkipDir
		}
		var st syscall.Stat_t
		if syscall.Lstat(p, &st) != nil {
			return nil
		}
		if st.Dev != root.Dev && st.Dev != vol.Dev {
			total += 4096 // a mount point: the directory under it
			return fs.SkipDir
		}
		total += st.Blocks * 512
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return total
}

func wsStoreBytes(path string) int64 {
	var n int64
	for _, p := range []string{path, path + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}
