package sessions

import (
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
