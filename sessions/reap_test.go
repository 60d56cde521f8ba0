package sessions

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"testing"
)

func TestNSInode(t *testing.T) {
	for link, want := range map[string]uint64{"mnt:[4026531841]": 4026531841, "mnt:[1]": 1} {
		if got, ok := nsInode([]byte(link)); !ok || got != want {
			t.Errorf("nsInode(%q) = %d, %v; want %d", link, got, ok, want)
		}
	}
	for _, link := range []string{"", "mnt:", "mnt:[]", "mnt:[12", "mnt:[x1]"} {
		if got, ok := nsInode([]byte(link)); ok {
			t.Errorf("nsInode(%q) = %d; want no inode", link, got)
		}
	}
}

// TestProcessesIn: a child in this process's mount namespace is found
// there, and not in another namespace; the daemon itself never is.
func TestProcessesIn(t *testing.T) {
	ns, err := mountNamespace(os.Getpid())
	if err != nil {
		t.Skip("no /proc: ", err)
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep: ", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	got := processesIn(map[uint64]bool{ns: true})
	if !slices.Contains(got, cmd.Process.Pid) {
		t.Errorf("processes in our namespace %v lack the child %d", got, cmd.Process.Pid)
	}
	if slices.Contains(got, os.Getpid()) {
		t.Errorf("processes in our namespace %v include this process", got)
	}
	if other := processesIn(map[uint64]bool{ns + 1<<40: true}); len(other) != 0 {
		t.Errorf("processes in a namespace that does not exist: %v", other)
	}
}

// TestKernelThreads: where kthreadd is PID 2, its children are kernel
// threads, and neither this process nor a child of it is among them.
func TestKernelThreads(t *testing.T) {
	kernel := kernelThreads()
	if kernel == nil {
		t.Skip("no kthreadd at PID 2 here (a PID namespace)")
	}
	if !kernel[2] || len(kernel) < 2 {
		t.Errorf("kernel threads %v: want kthreadd and its children", kernel)
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep: ", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for _, pid := range []int{os.Getpid(), cmd.Process.Pid, 1} {
		if kernel[pid] {
			t.Errorf("process %d counted as a kernel thread", pid)
		}
	}
	for pid := range kernel {
		if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && len(comm) > 0 {
			t.Errorf("kernel thread %d has a command line %q", pid, comm)
		}
	}
}

// BenchmarkProcessesIn is one scan of /proc for a namespace's processes.
//
//	go test -run '^$' -bench ProcessesIn ./sessions/
func BenchmarkProcessesIn(b *testing.B) {
	ns, err := mountNamespace(os.Getpid())
	if err != nil {
		b.Skip("no /proc: ", err)
	}
	in := map[uint64]bool{ns + 1<<40: true}
	for i := 0; i < b.N; i++ {
		processesIn(in)
	}
}
