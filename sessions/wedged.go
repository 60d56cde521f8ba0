package sessions

import (
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/layerfs/layerfs/internal/mountinfo"
	"golang.org/x/sys/unix"
)

// fuseConnections is where the kernel's fusectl filesystem lists FUSE
// connections, each with an abort file.
const fuseConnections = "/sys/fs/fuse/connections"

// fusectlMagic is fusectl's statfs type (linux/magic.h FUSE_CTL_SUPER_MAGIC).
const fusectlMagic = 0x65735543

// RescueWedged frees a state directory from a daemon killed while one of
// its own threads waited on its own FUSE mount: mounting an overlay over
// it, or renaming under a lock a FUSE request holds. The request, read by
// a server thread that died, is never answered; the waiting thread cannot
// die until it is; and the connection is only aborted when the last
// thread lets go of /dev/fuse. So the process never exits, holding the
// state directory's lock, the Store's SQLite locks and the socket. If the
// lock's holder is such a process — dying, yet still there after a
// moment — RescueWedged aborts the FUSE connections of the mounts under
// dir (fusectl), and waits a little for it to go. Call it before opening
// the Store: its locks are the first thing a restart meets.
func RescueWedged(dir string, logger *log.Logger) error {
	f, err := os.Open(filepath.Join(dir, "daemon.lock"))
	if err != nil {
		return nil // no daemon has used it
	}
	defer f.Close()
	if unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB) == nil {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		return nil // nobody holds it
	}
	// A killed daemon that is only slow to go is given a second first.
	for i := 0; i < 20 && holderDying(f); i++ {
		time.Sleep(50 * time.Millisecond)
		if !holderStill(f) {
			return nil
		}
	}
	if !holderDying(f) {
		return nil // alive: lockStateDir says it is in use
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	mounts, err := mountinfo.Read(mountinfo.Self)
	if err != nil {
		return err
	}
	var aborted []string
	for _, m := range mounts {
		if m.FSType != fsTypeLayerFS || !(m.Point == abs || strings.HasPrefix(m.Point, abs+"/")) {
			continue
		}
		if err := abortFUSE(m.Dev); err != nil {
			return fmt.Errorf("abort the FUSE connection of %s, whose daemon is stuck dying: %w", m.Point, err)
		}
		aborted = append(aborted, m.Point)
	}
	if len(aborted) > 0 {
		logger.Printf("the daemon before (pid %s) was stuck dying, waiting on its own FUSE mount: aborted the connection of %s",
			lockHolder(f), strings.Join(aborted, ", "))
	}
	for i := 0; i < 100 && holderStill(f); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// abortFUSE aborts the FUSE connection of the filesystem on device dev
// ("major:minor"), mounting fusectl first if it is not.
func abortFUSE(dev string) error {
	major, minor, ok := strings.Cut(dev, ":")
	ma, err1 := strconv.ParseUint(major, 10, 32)
	mi, err2 := strconv.ParseUint(minor, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return fmt.Errorf("device %q", dev)
	}
	var st unix.Statfs_t
	if unix.Statfs(fuseConnections, &st) != nil || st.Type != fusectlMagic {
		if err := unix.Mount("fusectl", fuseConnections, "fusectl", 0, ""); err != nil && !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("mount fusectl: %w", err)
		}
	}
	// The kernel names a connection by its dev_t: major << 20 | minor.
	name := strconv.FormatUint(ma<<20|mi, 10)
	return os.WriteFile(filepath.Join(fuseConnections, name, "abort"), []byte("1"), 0)
}

// holderStill reports whether the process the lock file names is there
// at all.
func holderStill(f *os.File) bool {
	pid := lockPID(f)
	return pid > 0 && unix.Kill(pid, 0) == nil
}

// lockHolder is what the lock file says of its holder: its pid, as text.
func lockHolder(f *os.File) string {
	data := make([]byte, 32)
	n, _ := f.ReadAt(data, 0)
	return strings.TrimSpace(string(data[:n]))
}

// lockPID is the lock file's holder's pid, or 0 if it names none.
func lockPID(f *os.File) int {
	pid, err := strconv.Atoi(lockHolder(f))
	if err != nil {
		return 0
	}
	return pid
}
