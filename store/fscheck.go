package store

import (
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Filesystems a Store may live on, by statfs magic. WAL needs shared memory
// and POSIX locks that behave, and append-only objects need a filesystem
// that does not lie about fsync: local ext4, xfs and btrfs. tmpfs is allowed
// for tests and scratch Stores.
var supportedFS = map[int64]string{
	unix.EXT4_SUPER_MAGIC:  "ext4",
	unix.XFS_SUPER_MAGIC:   "xfs",
	unix.BTRFS_SUPER_MAGIC: "btrfs",
	unix.TMPFS_MAGIC:       "tmpfs",
}

// Names of filesystems we may meet, so the error can say what was found.
var knownFS = map[int64]string{
	unix.NFS_SUPER_MAGIC:       "nfs",
	unix.SMB_SUPER_MAGIC:       "smb",
	unix.CIFS_SUPER_MAGIC:      "cifs",
	unix.OVERLAYFS_SUPER_MAGIC: "overlayfs",
	unix.FUSE_SUPER_MAGIC:      "fuse",
	unix.PROC_SUPER_MAGIC:      "proc",
	unix.SYSFS_MAGIC:           "sysfs",
	unix.V9FS_MAGIC:            "9p",
	unix.RAMFS_MAGIC:           "ramfs",
	unix.SQUASHFS_MAGIC:        "squashfs",
	0x2fc12fc1:                 "zfs",
	unix.MSDOS_SUPER_MAGIC:     "vfat",
	unix.EXFAT_SUPER_MAGIC:     "exfat",
	unix.CGROUP2_SUPER_MAGIC:   "cgroup2",
	unix.DEVPTS_SUPER_MAGIC:    "devpts",
}

// CheckFilesystem returns ErrUnsupported, naming the filesystem found, unless
// the directory that holds path is on a filesystem a Store may live on.
func CheckFilesystem(path string) error {
	dir := filepath.Dir(path)
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", dir, err)
	}
	magic := int64(st.Type)
	if _, ok := supportedFS[magic]; ok {
		return nil
	}
	name, ok := knownFS[magic]
	if !ok {
		name = "unknown filesystem"
	}
	return fmt.Errorf("%s is on %s (magic %#x): %w: a Store needs local ext4, xfs, btrfs or tmpfs",
		dir, name, magic, ErrUnsupported)
}
