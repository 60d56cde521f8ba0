package sessions

import (
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestListenRemovesOnlyAStaleSocket: Listen replaces a stale socket, and
// refuses a path that holds anything else (a mistyped --socket naming a
// file), leaving it as it was. It removed whatever did not answer.
func TestListenRemovesOnlyAStaleSocket(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(file, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if l, err := Listen(file); err == nil {
		l.Close()
		t.Fatal("listened in place of a regular file")
	}
	if data, err := os.ReadFile(file); err != nil || string(data) != "keep" {
		t.Fatalf("the file after Listen: %q, %v", data, err)
	}
	stale := filepath.Join(dir, "stale.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close() // the socket file stays, with nobody behind it
	l, err = Listen(stale)
	if err != nil {
		t.Fatalf("over a stale socket: %v", err)
	}
	l.Close()
}

// TestSocketIsPrivateFromItsBind: the socket file is 0600 as soon as it
// exists, under any umask (here 0): it was 0777 until Listen's chmod.
func TestSocketIsPrivateFromItsBind(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "d.sock")
	l, err := listenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket at bind: %v, %v; want 0600", fi.Mode(), err)
	}
}
