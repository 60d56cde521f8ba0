package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/layerfs/layerfs"
	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/sessions"
	"github.com/layerfs/layerfs/store"
)

// Fixtures of the Workspace benchmarks (workspace_*_test.go). They run a
// daemon in this process, serve its socket API on a unix socket, and drive
// it through the SDK's Client, as an agent would. They need root,
// /dev/fuse and overlayfs, and skip without them.
//
// Stores captured from trees are kept under $BENCH_WORK/layerfs-bench-cache
// (default /var/tmp), keyed by source, Go version and Store format, because
// init takes a while; each benchmark works on a private copy.

// wsNeedRoot skips a benchmark that cannot mount a Workspace.
func wsNeedRoot(b *testing.B) {
	b.Helper()
	needFUSE(b)
	if fss, _ := os.ReadFile("/proc/filesystems"); !strings.Contains(string(fss), "overlay") {
		b.Skip("workspace benchmarks need overlayfs")
	}
}

// wsTempDir is a new directory on local disk (benchDir, not a tmpfs
// /tmp), removed when the benchmark ends.
func wsTempDir(b *testing.B) string {
	b.Helper()
	dir, err := os.MkdirTemp(benchDir(), "layerfs-bench-ws")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

var wsBin struct {
	once sync.Once
	path string
	err  error
}

// wsLayerfsBin is the layerfs binary, built once per run into the cache
// directory: the daemon runs it as namespace holder.
func wsLayerfsBin(b *testing.B) string {
	b.Helper()
	wsBin.once.Do(func() {
		dir := filepath.Join(benchDir(), "layerfs-bench-cache")
		if wsBin.err = os.MkdirAll(dir, 0o755); wsBin.err != nil {
			return
		}
		tmp, err := os.MkdirTemp(dir, "bin")
		if err != nil {
			wsBin.err = err
			return
		}
		defer os.RemoveAll(tmp)
		out, err := exec.Command("go", "build", "-o", tmp, "github.com/layerfs/layerfs/cmd/layerfs").CombinedOutput()
		if err != nil {
			wsBin.err = fmt.Errorf("build layerfs: %v\n%s", err, out)
			return
		}
		wsBin.path = filepath.Join(dir, "layerfs")
		wsBin.err = os.Rename(filepath.Join(tmp, "layerfs"), wsBin.path)
	})
	if wsBin.err != nil {
		b.Fatal(wsBin.err)
	}
	return wsBin.path
}

var wsKept struct {
	mu    sync.Mutex
	paths map[string]string
}

// wsKeptStore returns a kept Store captured from the tree make builds
// under a directory it is given; key names the tree. The Store is built
// on first use and reused by later runs.
func wsKeptStore(b *testing.B, key string, make func(dir string) error) string {
	b.Helper()
	wsKept.mu.Lock()
	defer wsKept.mu.Unlock()
	if p, ok := wsKept.paths[key]; ok {
		return p
	}
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%s\x00%d", key, runtime.Version(), store.FormatVersion)))
	dir := filepath.Join(benchDir(), "layerfs-bench-cache")
	path := filepath.Join(dir, "ws-"+hex.EncodeToString(sum[:6])+".layerfs")
	if !usable(path) {
		if err := wsBuildStore(dir, path, make); err != nil {
			b.Fatalf("fixture %s: %v", key, err)
		}
	}
	if wsKept.paths == nil {
		wsKept.paths = map[string]string{}
	}
	wsKept.paths[key] = path
	return path
}

func wsBuildStore(dir, path string, make func(dir string) error) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	src, err := os.MkdirTemp(dir, "src")
	if err != nil {
		return err
	}
	defer os.RemoveAll(src)
	if err := make(src); err != nil {
		return err
	}
	tmp := path + ".building"
	os.Remove(tmp)
	st, err := layerfs.Open(tmp, layerfs.Options{Create: true, Durability: store.Fast})
	if err != nil {
		return err
	}
	start := time.Now()
	res, err := st.Init(src, layerfs.InitOptions{})
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("init: %w", err)
	}
	fmt.Fprintf(os.Stderr, "bench: captured %d files, %d bytes in %v into %s\n",
		res.Files, res.Bytes, time.Since(start).Round(time.Millisecond), path)
	return os.Rename(tmp, path)
}

// wsGoroot is Go's own tree, ~15k files.
func wsGoroot(b *testing.B) string {
	b.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		b.Fatalf("go env GOROOT: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// wsGorootStore is a kept Store of Go's tree.
func wsGorootStore(b *testing.B) string {
	root := wsGoroot(b)
	return wsKeptStore(b, "goroot:"+root, func(dir string) error { return wsCopyTree(root+"/.", dir) })
}

// ws100kStore is a kept Store of a tree of 100,000 files or more: copies
// of Go's src/ side by side under one root.
func ws100kStore(b *testing.B) string {
	src := filepath.Join(wsGoroot(b), "src")
	return wsKeptStore(b, "100k:"+src, func(dir string) error {
		for i := 0; ; i++ {
			n, err := wsCountFiles(dir)
			if err != nil || n >= 100_000 {
				return err
			}
			if err := wsCopyTree(src, filepath.Join(dir, fmt.Sprintf("src%d", i))); err != nil {
				return err
			}
		}
	})
}

func wsCopyTree(src, dst string) error {
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		return fmt.Errorf("cp -a %s: %v: %s", src, err, out)
	}
	return nil
}

func wsCountFiles(dir string) (int, error) {
	n := 0
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return err
	})
	return n, err
}

// wsStoreOf makes a private Store whose main holds the files of a map.
func wsStoreOf(b *testing.B, files map[string][]byte) string {
	b.Helper()
	dir := wsTempDir(b)
	src := filepath.Join(dir, "src")
	for p, data := range files {
		full := filepath.Join(src, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return wsStoreOfDir(b, src)
}

// wsStoreOfDir makes a private Store whose main holds the tree at src.
func wsStoreOfDir(b *testing.B, src string) string {
	b.Helper()
	path := filepath.Join(wsTempDir(b), "s.layerfs")
	st, err := layerfs.Open(path, layerfs.Options{Create: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Init(src, layerfs.InitOptions{}); err != nil {
		b.Fatal(err)
	}
	return path
}

// wsPrivateCopy copies a kept Store for one benchmark to change.
func wsPrivateCopy(b *testing.B, kept string) string {
	b.Helper()
	dst := filepath.Join(wsTempDir(b), "s.layerfs")
	in, err := os.Open(kept)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		b.Fatal(err)
	}
	if err := out.Close(); err != nil {
		b.Fatal(err)
	}
	return dst
}

// wsEnv is a daemon serving one Store on a unix socket in this process,
// and a Client of it.
type wsEnv struct {
	st       *layerfs.Store
	d        *sessions.Daemon
	c        *layerfs.Client
	stateDir string
	stop     func()
	phases   map[string]*samples
}

// wsStart opens the Store at path and serves it; everything is unmounted
// and closed when the benchmark ends.
func wsStart(b *testing.B, path string) *wsEnv {
	b.Helper()
	st, err := layerfs.Open(path, layerfs.Options{})
	if err != nil {
		b.Fatal(err)
	}
	dir, err := os.MkdirTemp(filepath.Dir(path), "state")
	if err != nil {
		b.Fatal(err)
	}
	d, err := sessions.Start(sessions.Config{Store: st.Backend(), StateDir: dir, Self: wsLayerfsBin(b),
		Logger: log.New(io.Discard, "", 0)})
	if err != nil {
		st.Close()
		b.Fatal(err)
	}
	sock := filepath.Join(dir, "daemon.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		d.Close()
		st.Close()
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { d.Serve(ctx, l); close(served) }()
	e := &wsEnv{st: st, d: d, c: layerfs.Dial(sock), stateDir: dir}
	e.stop = func() {
		cancel()
		<-served
		if err := d.Close(); err != nil {
			b.Errorf("close daemon: %v", err)
		}
		st.Close()
	}
	b.Cleanup(func() { e.close(b) })
	return e
}

// close stops the daemon, unmounting everything; later calls do nothing.
func (e *wsEnv) close(b *testing.B) {
	if e.stop != nil {
		e.stop()
		e.stop = nil
	}
}

// lifecycle is one Workspace's life: create, run a script, commit, end.
// It records each phase's time, and the commit receipt's, in e.phases.
func (e *wsEnv) lifecycle(b *testing.B, script string) {
	b.Helper()
	var id string
	e.phase("create", func() { id = e.create(b).ID })
	e.phase("exec", func() { e.sh(b, id, script) })
	if script != "true" {
		e.timedCommit(b, id)
	}
	e.phase("end", func() { e.end(b, id) })
}

// metric is the value of the daemon's metric name (GET /metrics).
func (e *wsEnv) metric(b *testing.B, name string) int64 {
	b.Helper()
	var buf bytes.Buffer
	e.d.WriteMetrics(&buf)
	for _, line := range strings.Split(buf.String(), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatalf("metric %s: %v", name, err)
			}
			return n
		}
	}
	b.Fatalf("no metric %s", name)
	return 0
}

// timedCommit commits, recording the call's time and its receipt's
// phases in e.phases.
func (e *wsEnv) timedCommit(b *testing.B, id string) {
	b.Helper()
	var r api.Receipt
	e.phase("commit", func() { r = e.commit(b, id).Receipt })
	for name, ms := range map[string]float64{"capture": r.CaptureMS, "prepare": r.PrepareMS,
		"lock": r.LockMS, "audit": r.AuditMS, "remount": r.RemountMS, "daemon": r.TotalMS} {
		e.record(name, time.Duration(ms*float64(time.Millisecond)))
	}
}

func (e *wsEnv) phase(name string, fn func()) {
	t := time.Now()
	fn()
	e.record(name, time.Since(t))
}

func (e *wsEnv) record(name string, d time.Duration) {
	if e.phases == nil {
		e.phases = map[string]*samples{}
	}
	if e.phases[name] == nil {
		e.phases[name] = &samples{}
	}
	*e.phases[name] = append(*e.phases[name], d)
}

// logPhases logs the median of each phase lifecycle recorded.
func (e *wsEnv) logPhases(b *testing.B) {
	var parts []string
	for _, name := range []string{"create", "exec", "commit", "daemon", "capture", "prepare", "lock", "audit", "remount", "end"} {
		if s := e.phases[name]; s != nil {
			parts = append(parts, fmt.Sprintf("%s %.2f", name, s.ms()))
		}
	}
	b.Logf("median ms per phase: %s", strings.Join(parts, ", "))
}

func (e *wsEnv) create(b *testing.B) api.Workspace {
	b.Helper()
	w, err := e.c.Create(context.Background(), api.CreateRequest{})
	if err != nil {
		b.Fatal(err)
	}
	return w
}

func (e *wsEnv) end(b *testing.B, id string) {
	b.Helper()
	if err := e.c.End(context.Background(), id, false); err != nil {
		b.Fatal(err)
	}
}

// sh runs a shell script in a Workspace; a non-zero exit fails.
func (e *wsEnv) sh(b *testing.B, id, script string) string {
	b.Helper()
	res, err := e.c.Exec(context.Background(), id, api.ExecRequest{Argv: []string{"sh", "-c", script}})
	if err != nil {
		b.Fatal(err)
	}
	if res.ExitCode != 0 {
		b.Fatalf("sh -c %q: exit %d\n%s%s", script, res.ExitCode, res.Stdout, res.Stderr)
	}
	return string(res.StdoutBytes())
}

func (e *wsEnv) commit(b *testing.B, id string) api.CommitResult {
	b.Helper()
	res, err := e.c.Commit(context.Background(), id, api.CommitRequest{})
	if err != nil {
		b.Fatal(err)
	}
	if res.Status != api.StatusCommitted {
		b.Fatalf("commit %s: %s, want committed", id, res.Status)
	}
	return res
}

// waitRemoved waits until an ended Workspace's directories are gone: the
// daemon removes them in the background, and a benchmark that goes on
// meanwhile measures that removal too.
func (e *wsEnv) waitRemoved(b *testing.B, id string) {
	b.Helper()
	dir := filepath.Join(e.stateDir, "ws", id)
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			return
		}
	}
	b.Fatalf("%s not removed after 5 minutes", dir)
}

// waitDrained waits until the state directory holds no ended Workspace's
// directories (the daemon removes them in the background): one at most, a
// spare.
func (e *wsEnv) waitDrained(b *testing.B) {
	b.Helper()
	live := len(e.d.List())
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if ents, err := os.ReadDir(filepath.Join(e.stateDir, "ws")); err == nil && workspaceDirs(ents) <= live+1 {
			return
		}
	}
	b.Fatalf("ended Workspaces' directories not removed after 5 minutes")
}

// workspaceDirs counts the Workspaces' directories among ents, the state
// directory's ws/: not the data layer's (.data) or the volume's own.
func workspaceDirs(ents []os.DirEntry) int {
	n := 0
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") {
			n++
		}
	}
	return n
}

// stored is what the Store's objects take, compressed or delta.
func (e *wsEnv) stored(b *testing.B) int64 {
	b.Helper()
	s, err := e.st.Backend().Stats()
	if err != nil {
		b.Fatal(err)
	}
	return s.StoredBytes
}

// samples collects per-operation durations and reports their median.
type samples []time.Duration

func (s *samples) time(fn func()) {
	t := time.Now()
	fn()
	*s = append(*s, time.Since(t))
}

func (s samples) median() time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := append(samples(nil), s...)
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	if n := len(c); n%2 == 0 {
		return (c[n/2-1] + c[n/2]) / 2
	}
	return c[len(c)/2]
}

func (s samples) ms() float64 { return float64(s.median().Microseconds()) / 1000 }

// report reports the median in ms under unit (e.g. "create-ms").
func (s samples) report(b *testing.B, unit string) { b.ReportMetric(s.ms(), unit) }
