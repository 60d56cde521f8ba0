package integration

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/sessions"
)

// loopbackPing listens on an ephemeral port of 127.0.0.1, connects to it
// and passes a line through (perl is in perl-base, on every Debian).
const loopbackPing = `use IO::Socket::INET;
$l = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 0, Listen => 1, ReuseAddr => 1) or die "listen: $!\n";
$c = IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => $l->sockport) or die "connect: $!\n";
$s = $l->accept or die "accept: $!\n";
print $c "ping\n";
print scalar <$s>;`

// TestWorkspaceNetworkIsolation: exec with IsolateNetwork sees only the
// loopback interface, which is up (a server and a client on 127.0.0.1
// talk), and cannot reach anything else; without it, the command sees the
// host's interfaces.
func TestWorkspaceNetworkIsolation(t *testing.T) {
	d := startDaemon(t, map[string]string{"a": "a\n"}, sessions.Config{})
	w := d.create(t, "main")
	run := func(isolate bool, argv ...string) api.ExecResult {
		t.Helper()
		res, err := d.Exec(t.Context(), w.ID, api.ExecRequest{Argv: argv, IsolateNetwork: isolate}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	hostDev, err := os.ReadFile("/proc/net/dev")
	if err != nil {
		t.Fatal(err)
	}
	host := interfaces(string(hostDev))
	if len(host) < 2 {
		t.Fatalf("the host has only %v: nothing to isolate from", host)
	}

	if got := interfaces(run(true, "cat", "/proc/net/dev").Stdout); strings.Join(got, " ") != "lo" {
		t.Errorf("isolated: /proc/net/dev lists %v, want only lo", got)
	}
	if out := run(true, "ip", "-o", "link").Stdout; strings.Count(out, "\n") != 1 || !strings.Contains(out, ": lo: <LOOPBACK,UP") {
		t.Errorf("isolated: ip -o link:\n%s", out)
	}
	if res := run(true, "perl", "-e", loopbackPing); res.ExitCode != 0 || res.Stdout != "ping\n" {
		t.Errorf("isolated: loopback listen and connect: exit %d %q %s", res.ExitCode, res.Stdout, res.Stderr)
	}
	unreachable := `use IO::Socket::INET; IO::Socket::INET->new(PeerAddr => "192.0.2.1", PeerPort => 80, Timeout => 5) and exit 0; print "$!\n"; exit 1`
	if res := run(true, "perl", "-e", unreachable); res.ExitCode == 0 || !strings.Contains(res.Stdout, "unreachable") {
		t.Errorf("isolated: connecting out: exit %d %q %s", res.ExitCode, res.Stdout, res.Stderr)
	}

	if got := interfaces(run(false, "cat", "/proc/net/dev").Stdout); strings.Join(got, " ") != strings.Join(host, " ") {
		t.Errorf("not isolated: /proc/net/dev lists %v, the host %v", got, host)
	}
	if res := run(false, "perl", "-e", loopbackPing); res.ExitCode != 0 || res.Stdout != "ping\n" {
		t.Errorf("not isolated: loopback: exit %d %q %s", res.ExitCode, res.Stdout, res.Stderr)
	}
}

// interfaces lists the interface names in /proc/net/dev text, sorted.
func interfaces(procNetDev string) []string {
	var out []string
	for _, l := range strings.Split(procNetDev, "\n") {
		if name, _, ok := strings.Cut(l, ":"); ok && !strings.Contains(name, "|") {
			out = append(out, strings.TrimSpace(name))
		}
	}
	sort.Strings(out)
	return out
}

// TestWorkspaceNamespaceHidesOthers: a command in one Workspace sees its
// own overlay at its path and nothing of the others — not their overlays
// at their host paths, not their upperdirs under the state directory —
// and no LayerFS mount at all beside its own view.
func TestWorkspaceNamespaceHidesOthers(t *testing.T) {
	d := startDaemon(t, map[string]string{"a": "a\n"}, sessions.Config{})
	a, b := d.create(t, "main"), d.create(t, "main")
	d.sh(t, b.ID, "echo secret > marker")
	if _, err := os.Stat(b.HostPath + "/marker"); err != nil {
		t.Fatalf("the host sees B at %s: %v", b.HostPath, err)
	}
	for _, p := range []string{b.HostPath + "/marker", d.stateDir + "/ws/" + b.ID} {
		if res := d.exec(t, a.ID, nil, "ls", p); res.ExitCode == 0 {
			t.Errorf("A's namespace reaches %s:\n%s", p, res.Stdout)
		}
	}
	if out := d.sh(t, a.ID, "ls -A "+d.stateDir); out != "" {
		t.Errorf("A's namespace shows the state directory:\n%s", out)
	}
	mounts := d.sh(t, a.ID, "cat /proc/self/mountinfo")
	if n := strings.Count(mounts, " - overlay "); n != 1 || strings.Contains(mounts, "fuse.layerfs") {
		t.Errorf("A's namespace holds %d overlays and these LayerFS mounts:\n%s", n, grepLines(mounts, "layerfs"))
	}
	// The namespace's view is the host path's overlay: a lock taken
	// through one is seen through the other.
	f, err := os.Open(a.HostPath + "/a")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if res := d.exec(t, a.ID, nil, "flock", "-n", "a", "true"); res.ExitCode != 1 {
		t.Errorf("flock -n inside A on a file locked through its host path: exit %d %s", res.ExitCode, res.Stderr)
	}
	f.Close()
	// After a commit A shows the new head, still alone.
	d.sh(t, a.ID, "echo mine > mine")
	d.commit(t, a.ID, api.StatusCommitted)
	if out := d.sh(t, a.ID, "cat mine; grep -c ' - overlay ' /proc/self/mountinfo"); out != "mine\n1\n" {
		t.Errorf("A after its commit: %q", out)
	}
}

func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestWorkspaceNamespaceFollowsHostMounts: Workspaces' namespaces are
// copies of one isolated template, made again when the host's mounts
// change: a filesystem mounted on the host after the daemon started shows
// in the Workspaces created after it (all but the one or two made ahead of
// need, before it), and one unmounted there stops showing. However many
// Workspaces live, a new one holds only its own overlay.
func TestWorkspaceNamespaceFollowsHostMounts(t *testing.T) {
	d := startDaemon(t, map[string]string{"a": "a\n"}, sessions.Config{})
	live := 0
	for ; live < 8; live++ {
		d.create(t, "main")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		t.Fatalf("mount a tmpfs on the host: %v", err)
	}
	mounted := true
	unmount := func() {
		if mounted {
			if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", dir, err)
			}
			mounted = false
		}
	}
	t.Cleanup(unmount)
	if err := os.WriteFile(dir+"/marker", []byte("host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// sees creates Workspaces until one sees the marker as want says, at
	// most four (the pool's holder and the spare were made before).
	sees := func(want bool) {
		t.Helper()
		for i := 0; i < 4; i++ {
			ws := d.create(t, "main")
			live++
			res := d.exec(t, ws.ID, nil, "cat", dir+"/marker")
			if (res.ExitCode == 0) == want {
				mounts := d.sh(t, ws.ID, "cat /proc/self/mountinfo")
				if n := strings.Count(mounts, " - overlay "); n != 1 || strings.Contains(mounts, "fuse.layerfs") {
					t.Errorf("with %d Workspaces live, a new one holds %d overlays and these LayerFS mounts:\n%s",
						live, n, grepLines(mounts, "layerfs"))
				}
				return
			}
		}
		t.Errorf("after 4 creates, no Workspace's view of the host mount %s is %v", dir, want)
	}
	sees(true)
	unmount()
	sees(false)
}

// TestWorkspaceNamespaceFollowsMovedHostMount: a filesystem moved on the
// host (mount --move, which keeps the mount's ID) shows at its new place
// in the Workspaces created after the move, and no longer at the old
// one: the template was not made again for a move, and every new
// Workspace went on seeing the mount where it had been.
func TestWorkspaceNamespaceFollowsMovedHostMount(t *testing.T) {
	d := startDaemon(t, map[string]string{"a": "a\n"}, sessions.Config{})
	// A private parent: a mount whose parent is shared cannot be moved.
	parent := t.TempDir()
	if err := syscall.Mount("tmpfs", parent, "tmpfs", 0, "size=64k"); err != nil {
		t.Fatalf("mount a tmpfs on the host: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(parent, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", parent, err)
		}
	})
	if err := syscall.Mount("", parent, "", syscall.MS_PRIVATE, ""); err != nil {
		t.Fatal(err)
	}
	from, to := filepath.Join(parent, "from"), filepath.Join(parent, "to")
	for _, p := range []string{from, to} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mount("tmpfs", from, "tmpfs", 0, "size=64k"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(from+"/marker", []byte("host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// sees creates Workspaces until one sees the marker at dir, at most
	// four (the pool's holder and the spare were made before).
	sees := func(dir string) {
		t.Helper()
		for i := 0; i < 4; i++ {
			ws := d.create(t, "main")
			if d.exec(t, ws.ID, nil, "cat", dir+"/marker").ExitCode == 0 {
				return
			}
		}
		t.Fatalf("after 4 creates, no Workspace sees the host mount at %s", dir)
	}
	sees(from)
	if err := syscall.Mount(from, to, "", syscall.MS_MOVE, ""); err != nil {
		t.Fatalf("move the mount: %v", err)
	}
	sees(to)
}

// TestWorkspaceUmask: commands run with umask 022, and the Workspace's
// root is 0755, whatever umask the daemon was started with: under 077
// every file a command wrote was 0600, and was committed so.
func TestWorkspaceUmask(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, map[string]string{"a.txt": "a\n"})
	old := syscall.Umask(0o077)
	t.Cleanup(func() { syscall.Umask(old) })
	d := startDaemonFrom(t, src, sessions.Config{})
	w := d.create(t, "main")
	const script = "umask && echo x > f && mkdir nd && stat -c %a . f nd"
	if out := d.sh(t, w.ID, script); out != "0022\n755\n644\n755\n" {
		t.Fatalf("umask, modes: %q", out)
	}
	res, err := d.Exec(context.Background(), w.ID, api.ExecRequest{Argv: []string{"sh", "-c", "umask && echo y > g && stat -c %a g"}, IsolateNetwork: true}, nil)
	if err != nil || res.Stdout != "0022\n644\n" {
		t.Fatalf("with its own network: %q, %v", res.Stdout, err)
	}
	d.commit(t, w.ID, api.StatusCommitted)
	if out := d.sh(t, w.ID, "stat -c %a . f nd g"); out != "755\n644\n755\n644\n" {
		t.Fatalf("after the commit: %q", out)
	}
}

// TestWorkspacePathRemovedOnHost: the directory a Workspace's view is
// attached over in its namespace is the host's; removing it on the host
// detaches the view. The next command finds the Workspace there again —
// it found no directory, or once one was made again the host's, and
// what it wrote there no commit took.
func TestWorkspacePathRemovedOnHost(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{})
	p := filepath.Join(t.TempDir(), "ws")
	w, err := d.Create(api.CreateRequest{Branch: "main", Path: p})
	if err != nil {
		t.Fatal(err)
	}
	if out := d.sh(t, w.ID, "cat a.txt"); out != "a\n" {
		t.Fatalf("reads %q", out)
	}
	if err := os.Remove(p); err != nil { // empty on the host
		t.Fatal(err)
	}
	if out := d.sh(t, w.ID, "cat a.txt && echo b > b.txt"); out != "a\n" {
		t.Fatalf("after the removal: %q", out)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if out := d.sh(t, w.ID, "cat a.txt b.txt && echo c > c.txt"); out != "a\nb\n" {
		t.Fatalf("after the removal and a new directory: %q", out)
	}
	if names, _ := os.ReadDir(p); len(names) != 0 {
		t.Fatalf("the host's directory holds %v", names)
	}
	d.commit(t, w.ID, api.StatusCommitted)
	if got := d.read(t, "main", "b.txt") + d.read(t, "main", "c.txt"); got != "b\nc\n" {
		t.Fatalf("main reads %q", got)
	}
}
