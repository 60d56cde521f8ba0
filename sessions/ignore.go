package sessions

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/publish"
	"github.com/layerfs/layerfs/store"
)

// ignoreRules reads the ignore rules a Workspace's capture goes by: its
// /.layerfsignore as it sees it, with what it includes — the leased
// Commit's, or the Workspace's own once it changed it — as git reads
// .gitignore from the work tree. A commit that adds node_modules/ to the
// file leaves node_modules out; a head whose rules changed since the
// lease changes nothing until the Workspace follows it. (The gate leaves
// unvalidated only what both its base's and its head's rules ignore.) The
// files are read through the view, never following a symlink nor leaving
// it: a command may have put anything there.
func (w *workspace) ignoreRules() (*publish.Rules, error) {
	root, err := unix.Open(w.hostPath(), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("read the Workspace's %s: %w", publish.IgnoreFile, err)
	}
	defer unix.Close(root)
	// An empty directory where the view should be (a switch that failed
	// half way) would read as no rules at all.
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(root, &sfs); err != nil {
		return nil, fmt.Errorf("read the Workspace's %s: %w", publish.IgnoreFile, err)
	}
	if sfs.Type != unix.OVERLAYFS_SUPER_MAGIC {
		return nil, fmt.Errorf("read the Workspace's %s: its view at %s is not mounted", publish.IgnoreFile, w.hostPath())
	}
	r, err := publish.LoadRulesWith(func(p string) ([]byte, error) { return readBeneath(root, p) }, publish.IgnoreFile)
	if err != nil {
		return nil, fmt.Errorf("the Workspace's %s: %w", publish.IgnoreFile, err)
	}
	return r, nil
}

// readBeneath reads the regular file at p (slash-separated, from root) if
// it is at most publish.MaxRuleFile bytes, and returns nil for one that is
// missing, not a regular file, too big, or reached through a symlink. It
// looks before it opens: a device a command made there is never opened.
func readBeneath(root int, p string) ([]byte, error) {
	if _, err := store.SplitPath(p); err != nil {
		return nil, err
	}
	const flags = unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW
	fd, err := unix.Openat2(root, p, &unix.OpenHow{
		Flags:   uint64(flags),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_XDEV,
	})
	if errors.Is(err, unix.ENOSYS) { // Linux < 5.6: the last component is still not followed
		fd, err = unix.Openat(root, p, flags, 0)
	}
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("open %s: %w", p, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("stat %s: %w", p, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size > publish.MaxRuleFile {
		return nil, nil
	}
	// The file itself, by its descriptor: the path may have changed since.
	f, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", fd), os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", p, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, publish.MaxRuleFile+1))
	if err != nil || len(data) > publish.MaxRuleFile {
		return nil, err
	}
	return data, nil
}
