// Package ovl names the extended attributes overlayfs keeps in an
// upperdir (and asks a lower layer for), and reads them. trusted.* needs
// root; LayerFS mounts overlays as root.
package ovl

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Overlayfs records deletions, opaque directories, renamed directories
// and files copied up metadata only with these.
const (
	Opaque   = "trusted.overlay.opaque"
	Redirect = "trusted.overlay.redirect"
	Whiteout = "trusted.overlay.whiteout"
	Metacopy = "trusted.overlay.metacopy"
	// Origin names the lower inode an entry was copied up from, by its
	// file handle.
	Origin = "trusted.overlay.origin"
)

// Get returns a file's extended attribute name, "" if it has none. It
// does not follow a symlink.
func Get(path, name string) (string, error) {
	buf := make([]byte, 4096)
	n, err := unix.Lgetxattr(path, name, buf)
	if errors.Is(err, unix.ENODATA) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read %s of %s: %w", name, path, err)
	}
	return string(buf[:n]), nil
}

// Has reports whether a file has the extended attribute name. It does not
// follow a symlink.
func Has(path, name string) (bool, error) {
	_, err := unix.Lgetxattr(path, name, nil)
	if errors.Is(err, unix.ENODATA) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s of %s: %w", name, path, err)
	}
	return true, nil
}

// FGet is Get of the file open as fd; name, for errors, is its path.
func FGet(fd int, name, attr string) (string, error) {
	buf := make([]byte, 4096)
	n, err := unix.Fgetxattr(fd, attr, buf)
	if errors.Is(err, unix.ENODATA) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read %s of %s: %w", attr, name, err)
	}
	return string(buf[:n]), nil
}

// FHas is Has of the file open as fd; name, for errors, is its path.
func FHas(fd int, name, attr string) (bool, error) {
	_, err := unix.Fgetxattr(fd, attr, nil)
	if errors.Is(err, unix.ENODATA) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s of %s: %w", attr, name, err)
	}
	return true, nil
}
