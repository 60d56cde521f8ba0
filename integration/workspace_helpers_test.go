package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs"
	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/internal/mountinfo"
	"github.com/layerfs/layerfs/sessions"
	"github.com/layerfs/layerfs/store"
)

// Helpers of the Workspace tests. In-process daemons close in t.Cleanup;
// daemon processes are stopped by PID, and whatever they left mounted
// under their state directory is detached and reported.

// startDaemonFrom is startDaemon over a Store initialized from the
// directory src, which keeps its modes, times and symlinks. The state
// directory is cfg.StateDir if set, else a new one.
func startDaemonFrom(t *testing.T, src string, cfg sessions.Config) *testDaemon {
	t.Helper()
	dir := t.TempDir()
	st, err := layerfs.Open(filepath.Join(dir, "s.layerfs"), layerfs.Options{Create: true, Durability: store.Fast})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Init(src, layerfs.InitOptions{}); err != nil {
		st.Close()
		t.Fatal(err)
	}
	cfg.Store = st.Backend()
	if cfg.StateDir == "" {
		cfg.StateDir = filepath.Join(dir, "state")
	}
	cfg.Self = layerfsBin
	if cfg.VolumeSize == 0 {
		cfg.VolumeSize = 2 << 30 // ample for any test, and tests run side by side
	}
	d, err := sessions.Start(cfg)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	td := &testDaemon{Daemon: d, st: st, stateDir: cfg.StateDir}
	t.Cleanup(func() {
		if err := td.Daemon.Close(); err != nil {
			t.Errorf("close daemon: %v", err)
		}
		st.Close()
		checkNoMountsUnder(t, cfg.StateDir)
	})
	return td
}

// exec runs argv in a Workspace with env and returns the result; a
// failure to start fails the test, a non-zero exit does not.
func (d *testDaemon) exec(t *testing.T, id string, env []string, argv ...string) api.ExecResult {
	t.Helper()
	res, err := d.Exec(context.Background(), id, api.ExecRequest{Argv: argv, Env: env}, nil)
	if err != nil {
		t.Fatalf("exec %v in %s: %v", argv, id, err)
	}
	return res
}

// export materializes ref into a new temporary directory.
func exportRef(t *testing.T, st *layerfs.Store, ref string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "export")
	if _, err := st.Export(ref, dir, layerfs.ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// findEntry is what find -printf reports of one path.
type findEntry struct {
	Type, Mode, Owner, Size, Target, MTime string
}

func (e findEntry) String() string {
	return fmt.Sprintf("%s %s %s size=%s ->%q mtime=%s", e.Type, e.Mode, e.Owner, e.Size, e.Target, e.MTime)
}

// findTree lists every path below dir (not dir itself) with find -printf:
// type, mode, owner, size (files only: trees do not store directory
// sizes), link target and mtime with nanoseconds.
func findTree(t *testing.T, dir string) map[string]findEntry {
	t.Helper()
	out, err := exec.Command("find", dir, "-mindepth", "1", "-printf", `%P\t%y\t%m\t%U:%G\t%s\t%l\t%T@\n`).Output()
	if err != nil {
		t.Fatalf("find %s: %v", dir, err)
	}
	tree := map[string]findEntry{}
	for _, l := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		if l == "" {
			continue
		}
		f := strings.Split(l, "\t")
		e := findEntry{Type: f[1], Mode: f[2], Owner: f[3], Size: f[4], Target: f[5], MTime: f[6]}
		if e.Type != "f" {
			e.Size = "-"
		}
		tree[f[0]] = e
	}
	return tree
}

// diffTrees describes how two find listings differ, path by path, after
// norm (if set) has adjusted each entry; "" when they agree.
func diffTrees(want, got map[string]findEntry, norm func(path string, e findEntry) findEntry) string {
	paths := map[string]bool{}
	for p := range want {
		paths[p] = true
	}
	for p := range got {
		paths[p] = true
	}
	sorted := make([]string, 0, len(paths))
	for p := range paths {
		sorted = append(sorted, p)
	}
	sort.Strings(sorted)
	var b strings.Builder
	for _, p := range sorted {
		w, wok := want[p]
		g, gok := got[p]
		if norm != nil {
			w, g = norm(p, w), norm(p, g)
		}
		switch {
		case !gok:
			fmt.Fprintf(&b, "  %s: missing (want %s)\n", p, w)
		case !wok:
			fmt.Fprintf(&b, "  %s: unexpected %s\n", p, g)
		case w != g:
			fmt.Fprintf(&b, "  %s:\n    want %s\n    got  %s\n", p, w, g)
		}
	}
	return b.String()
}

// diffR runs diff -r on two trees and fails the test on any difference.
func diffR(t *testing.T, want, got string) {
	t.Helper()
	if out, err := exec.Command("diff", "-r", "--no-dereference", want, got).CombinedOutput(); err != nil {
		t.Errorf("diff -r %s %s: %v\n%.3000s", want, got, err, out)
	}
}

// setTimes gives every path below dir (dir included, symlinks themselves
// rather than their targets) the mtime and atime tm, deepest first so a
// directory's time is not disturbed afterwards.
func setTimes(t *testing.T, dir string, tm time.Time) {
	t.Helper()
	var paths []string
	filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		paths = append(paths, p)
		return err
	})
	ts := []unix.Timespec{unix.NsecToTimespec(tm.UnixNano()), unix.NsecToTimespec(tm.UnixNano())}
	for i := len(paths) - 1; i >= 0; i-- {
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, paths[i], ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			t.Fatal(err)
		}
	}
}

// mountsUnder lists the mount points below dir (not dir itself, which may
// be a filesystem of its own), deepest first.
func mountsUnder(dir string) []string {
	mounts, err := mountinfo.Read(mountinfo.Self)
	if err != nil {
		return nil
	}
	return slices.DeleteFunc(mountinfo.Under(mounts, dir), func(p string) bool { return p == dir })
}

// checkNoMountsUnder fails the test if anything is mounted below dir, and
// detaches it so the suite goes on.
func checkNoMountsUnder(t *testing.T, dir string) {
	t.Helper()
	left := mountsUnder(dir)
	if len(left) == 0 {
		return
	}
	t.Errorf("mounts left under %s:\n%s", dir, strings.Join(left, "\n"))
	for _, m := range left {
		unix.Unmount(m, unix.MNT_DETACH)
	}
}

// daemonProc is a layerfs daemon run as a child process.
type daemonProc struct {
	cmd                     *exec.Cmd
	store, stateDir, socket string
	exited                  chan struct{}
	client                  *layerfs.Client
}

// startDaemonProc runs layerfs daemon on storePath with stateDir and
// waits until its socket answers. The test's cleanup stops it with
// SIGTERM if it still runs (SIGKILL after 20 s), then checks that nothing
// is left mounted under stateDir.
func startDaemonProc(t *testing.T, storePath, stateDir string, extra ...string) *daemonProc {
	t.Helper()
	socket := filepath.Join(stateDir+".sock.d", "daemon.sock")
	args := append([]string{"daemon", "--store", storePath, "--state-dir", stateDir, "--socket", socket}, extra...)
	return runDaemonProc(t, exec.Command(layerfsBin, args...), storePath, stateDir, socket)
}

// runDaemonProc is startDaemonProc with the daemon's command: cmd serves
// storePath on socket with stateDir.
func runDaemonProc(t *testing.T, cmd *exec.Cmd, storePath, stateDir, socket string) *daemonProc {
	t.Helper()
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &daemonProc{cmd: cmd, store: storePath, stateDir: stateDir, socket: socket,
		exited: make(chan struct{}), client: layerfs.Dial(socket)}
	go func() { cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		if p.running() {
			p.stop(t)
		}
		checkNoMountsUnder(t, stateDir)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		if _, err := p.client.Health(ctx); err == nil {
			return p
		}
		select {
		case <-p.exited:
			t.Fatalf("layerfs daemon exited: %v", cmd.ProcessState)
		case <-ctx.Done():
			t.Fatalf("layerfs daemon on %s does not answer", socket)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (p *daemonProc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (p *daemonProc) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		if !p.cmd.ProcessState.Success() {
			t.Errorf("layerfs daemon after SIGTERM: %v", p.cmd.ProcessState)
		}
	case <-time.After(20 * time.Second):
		t.Errorf("layerfs daemon %d ignores SIGTERM; killing it", p.cmd.Process.Pid)
		p.kill()
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *daemonProc) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}
