// Command loopback serves a directory through go-fuse's own loopback
// filesystem (fs.NewLoopbackRoot), with go-fuse's default 1 s timeouts, as the FUSE
// anchor the mount benchmarks compare layerfs against. It mounts with
// DirectMount (no fusermount needed), prints "ready" once mounted and
// unmounts on SIGINT or SIGTERM.
//
//	loopback DIR MOUNTPOINT
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: loopback DIR MOUNTPOINT")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "loopback:", err)
		os.Exit(1)
	}
}

func run(dir, mnt string) error {
	root, err := fs.NewLoopbackRoot(dir)
	if err != nil {
		return err
	}
	sec := time.Second // go-fuse's default timeouts, as libfuse's
	srv, err := fs.Mount(mnt, root, &fs.Options{
		MountOptions: fuse.MountOptions{DirectMount: true, DirectMountStrict: true, FsName: dir, Name: "loopback"},
		EntryTimeout: &sec, AttrTimeout: &sec,
	})
	if err != nil {
		return err
	}
	fmt.Println("ready")
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	served := make(chan struct{})
	go func() { srv.Wait(); close(served) }()
	select {
	case <-served: // unmounted from outside
	case <-sigs:
		// go-fuse's Unmount waits for serving to stop, which a copy of the
		// mount in another mount namespace can keep up: give up after a
		// while; the copy fails with ENOTCONN once this process exits.
		go srv.Unmount()
		select {
		case <-served:
		case <-time.After(5 * time.Second):
		}
	}
	return nil
}
