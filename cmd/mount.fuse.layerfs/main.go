// Command mount.fuse.layerfs is the mount(8) helper for layerfs, so that
//
//	mount -t fuse.layerfs STORE#REF MOUNTPOINT
//	mount -t fuse.layerfs -o all_commits STORE MOUNTPOINT
//
// and /etc/fstab lines such as
//
//	/srv/project.layerfs#main  /mnt/project  fuse.layerfs  ro,allow_other  0 0
//
// work as for any FUSE filesystem. mount(8) runs it as
// mount.fuse.layerfs SOURCE MOUNTPOINT [-o OPTIONS]; it returns once the
// mount is ready and leaves a background server serving it. The options
// are those of layerfs mount -o. make install puts it in /sbin.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/layerfs/layerfs/fusefs"
)

// Exit codes mount(8) documents for helpers.
const (
	exitUsage = 1  // incorrect invocation
	exitMount = 32 // mount failure
)

const usage = `Usage: mount.fuse.layerfs SOURCE MOUNTPOINT [-o OPTIONS]

The mount(8) helper for layerfs: mount -t fuse.layerfs STORE#REF MOUNTPOINT
mounts a ref of a Store read-only; mount -t fuse.layerfs -o all_commits STORE
MOUNTPOINT mounts every Commit by id. OPTIONS are those of layerfs mount -o
(see layerfs mount --help). It returns once the mount is ready, leaving a
background server; layerfs umount MOUNTPOINT (or umount) ends it.
`

func main() {
	if len(os.Args) == 2 && (os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "-help") {
		fmt.Print(usage)
		return
	}
	req, err := fusefs.ParseHelperArgs(os.Args[1:])
	if err == nil {
		err = fusefs.Run(req)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mount.fuse.layerfs: %v\n", err)
		if errors.Is(err, fusefs.ErrBadOption) || errors.Is(err, fusefs.ErrBadSource) {
			fmt.Fprint(os.Stderr, "\n"+usage)
			os.Exit(exitUsage)
		}
		os.Exit(exitMount)
	}
}
