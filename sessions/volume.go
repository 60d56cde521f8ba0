package sessions

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/internal/mountinfo"
)

// A Workspace's first write to a big file copies the whole file up before
// the write lands: 32 MiB read through the Store's FUSE mount and written
// to the upperdir, 20–100 ms for a 10-byte edit. On a filesystem that
// clones files (XFS with reflink, btrfs) overlayfs copies up by cloning
// instead, in well under a millisecond, if the file's data is on that same
// filesystem. So the daemon keeps the Workspaces' directories on such a
// filesystem — the state directory's own if it clones, else an XFS image
// in the state directory, mounted through a loop device — and keeps there,
// beside them, a data file of each big file a Workspace committed (see
// dataLayer): the overlay's data-only layer, which the Store's FUSE mount
// points each such file at (fusefs.Options.DataRedirect).

// Volume modes (Config.Volume).
const (
	VolumeAuto = ""    // the state directory's filesystem if it clones, else an XFS image if mkfs.xfs is there
	VolumeOff  = "off" // the state directory's filesystem, cloning or not
)

const (
	volumeImage = "ws.img" // in the state directory
	// DefaultVolumeSize is the size of the XFS image, allocated when it is
	// made, unless a quarter of the free space is less: all Workspaces'
	// uncommitted changes and the data files share it.
	DefaultVolumeSize = 16 << 30
	volumeSizeMin     = 512 << 20 // XFS's smallest is 300 MiB
)

// unmountVolume unmounts the volume at dir: at once if nothing uses it
// any more, so its loop device detaches now, else when its last user
// goes.
func unmountVolume(dir string) error {
	if err := unix.Unmount(dir, 0); err == nil || errors.Is(err, unix.EINVAL) {
		return nil
	}
	return unmount(dir)
}

// setupVolume makes the Workspaces' directory, d.dir("ws"), one on a
// filesystem that clones files, as far as it can: after it, d.data is the
// data layer or nil.
func (d *Daemon) setupVolume() error {
	ws := d.dir("ws")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		return err
	}
	if d.cfg.Volume != VolumeAuto && d.cfg.Volume != VolumeOff {
		return fmt.Errorf("volume %q: want %q or %q", d.cfg.Volume, VolumeAuto, VolumeOff)
	}
	img := d.dir(volumeImage)
	m, mounted, err := mountAt(ws)
	if err != nil {
		return err
	}
	_, statErr := os.Stat(img)
	hasImage := statErr == nil
	switch {
	case mounted && m.Source == loopOf(img):
		d.volume = ws // mounted before a crash: ours, with the upperdirs on it
	case hasImage && !mounted:
		// Made by an earlier run: it holds the Workspaces, whatever the mode.
		if err := d.mountImage(img, ws); err != nil {
			return err
		}
		d.volume = ws
	case d.cfg.Volume == VolumeOff:
		return nil
	case mounted:
		// Someone's own filesystem for the Workspaces: used as it is.
	case canClone(ws) == nil:
		// The state directory's filesystem clones.
	case hasWorkspaces(ws):
		d.log.Printf("Workspaces on %s from a run without a volume: staying there; big files are copied up whole", ws)
		return nil
	default:
		if err := d.makeImage(img); err != nil {
			d.log.Printf("Workspaces on the state directory's filesystem, which cannot clone files: big files are copied up whole (%v)", err)
			return nil
		}
		if err := d.mountImage(img, ws); err != nil {
			os.Remove(img) // never used
			d.log.Printf("Workspaces on the state directory's filesystem, which cannot clone files: big files are copied up whole (%v)", err)
			return nil
		}
		d.volume = ws
	}
	if d.volume != "" {
		// The image's root is mkfs's 0755: keep others out of the upperdirs.
		if err := os.Chmod(ws, 0o700); err != nil {
			return err
		}
	}
	if why := d.noDataLayer(ws); why != "" {
		d.log.Printf("no data layer on %s: %s; big files are copied up whole", ws, why)
		return nil
	}
	data, err := openDataLayer(filepath.Join(ws, dataDirName), d.volumeSize()/4, d.log.Printf)
	if err != nil {
		return err
	}
	d.data = data
	return nil
}

// noDataLayer says why Workspaces on ws can have no data layer, or "" if
// they can: its filesystem must clone files and be one whose block maps
// capture trusts (XFS, btrfs: FIEMAP with FIEMAP_FLAG_SYNC shows a
// rewritten block at its new address), and overlayfs must take data-only
// layers (Linux 6.7 or later).
func (d *Daemon) noDataLayer(ws string) string {
	if err := canClone(ws); err != nil {
		return err.Error()
	}
	switch fs, err := fsType(ws); {
	case err != nil:
		return err.Error()
	case fs != unix.XFS_SUPER_MAGIC && fs != unix.BTRFS_SUPER_MAGIC:
		return fmt.Sprintf("filesystem type %#x: only XFS and btrfs block maps are trusted", fs)
	}
	if err := probeDataLayers(ws); err != nil {
		return fmt.Sprintf("overlayfs takes no data-only layers here (needs Linux 6.7): %v", err)
	}
	return ""
}

// probeDataLayers asks overlayfs to take dir as a lower and a data-only
// layer, mounting nothing.
func probeDataLayers(dir string) error {
	fs, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return err
	}
	defer unix.Close(fs)
	for _, o := range []string{"lowerdir+", "datadir+"} {
		if err := unix.FsconfigSetString(fs, o, dir); err != nil {
			return fmt.Errorf("%s: %w", o, err)
		}
	}
	return unix.FsconfigSetString(fs, "metacopy", "on")
}

// hasWorkspaces reports whether dir holds any Workspace's directory.
func hasWorkspaces(dir string) bool {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") {
			return true
		}
	}
	return false
}

// volumeSize is the image's size: the existing image's, else the
// configured one, else DefaultVolumeSize but at most a quarter of the
// space free on the state directory's filesystem.
func (d *Daemon) volumeSize() int64 {
	if fi, err := os.Stat(d.dir(volumeImage)); err == nil {
		return fi.Size()
	}
	if d.cfg.VolumeSize > 0 {
		return d.cfg.VolumeSize
	}
	var st unix.Statfs_t
	if err := unix.Statfs(d.cfg.StateDir, &st); err != nil {
		return DefaultVolumeSize
	}
	return min(DefaultVolumeSize, int64(st.Bavail)*st.Bsize/4)
}

// mountImage mounts the XFS image img at dir.
func (d *Daemon) mountImage(img, dir string) error {
	// A detached mount of the image may still be going away (a daemon
	// closed, its last overlays still in use): then its loop device is
	// still attached, and mounting that device again shares the live
	// filesystem; two loop devices on one image would corrupt it. A
	// device being detached fails the mount: wait for it to go.
	dev := loopOf(img)
	if dev != "" {
		err := unix.Mount(dev, dir, "xfs", unix.MS_NOSUID|unix.MS_NODEV, "")
		if err == nil {
			return nil
		}
		for i := 0; i < 100 && loopOf(img) == dev; i++ {
			time.Sleep(20 * time.Millisecond)
		}
		if dev = loopOf(img); dev != "" {
			return fmt.Errorf("volume %s: still attached to %s, which cannot be mounted: %w", img, dev, err)
		}
	}
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	loop, err := attachLoop(f)
	f.Close() // the loop device holds the file
	if err != nil {
		return fmt.Errorf("volume %s: %w", img, err)
	}
	defer loop.Close() // after the mount: closed before, it detaches
	dev = loop.Name()
	if err := unix.Mount(dev, dir, "xfs", unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("mount %s (%s) at %s: %w", img, dev, dir, err)
	}
	return nil
}

// makeImage makes an XFS image of the configured size, with its space
// allocated: the state directory's filesystem filling up later then costs
// no Workspace a write it already made.
func (d *Daemon) makeImage(img string) error {
	mkfs, err := exec.LookPath("mkfs.xfs")
	for _, dir := range []string{"/usr/sbin", "/sbin"} { // a PATH without the sbins
		if err != nil {
			mkfs, err = exec.LookPath(filepath.Join(dir, "mkfs.xfs"))
		}
	}
	if err != nil {
		return fmt.Errorf("mkfs.xfs (xfsprogs): %w", exec.ErrNotFound)
	}
	if fs, err := fsType(filepath.Dir(img)); err != nil {
		return err
	} else if fs == unix.TMPFS_MAGIC {
		return errors.New("the state directory is on tmpfs, where an image would take memory")
	}
	size := d.volumeSize()
	if size < volumeSizeMin && d.cfg.VolumeSize == 0 {
		return fmt.Errorf("%d MiB, a quarter of the state directory's free space, is too small for an image", size>>20)
	}
	if size < volumeSizeMin {
		return fmt.Errorf("volume size %d MiB: at least %d MiB", size>>20, volumeSizeMin>>20)
	}
	tmp := img + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = unix.Fallocate(int(f.Fd()), 0, 0, size)
	f.Close()
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("allocate %d bytes for %s: %w", size, img, err)
	}
	out, err := exec.Command(mkfs, "-q", "-m", "reflink=1", tmp).CombinedOutput()
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("mkfs.xfs %s: %v: %s", tmp, err, strings.TrimSpace(string(out)))
	}
	d.log.Printf("made %s, an XFS image of %d MiB for the Workspaces", img, size>>20)
	return os.Rename(tmp, img)
}

// attachLoop attaches f to a free loop device, which detaches itself
// when its last user is gone — the filesystem mounted on it, or, before
// that, the device file it returns open.
func attachLoop(f *os.File) (*os.File, error) {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer ctl.Close()
	for try := 0; ; try++ {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return nil, fmt.Errorf("find a free loop device: %w", err)
		}
		dev := fmt.Sprintf("/dev/loop%d", n)
		lf, err := os.OpenFile(dev, os.O_RDWR, 0)
		if err != nil {
			return nil, err
		}
		cfg := unix.LoopConfig{Fd: uint32(f.Fd())}
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
		err = unix.IoctlLoopConfigure(int(lf.Fd()), &cfg)
		if err == nil {
			return lf, nil
		}
		lf.Close()
		if !errors.Is(err, unix.EBUSY) || try == 10 {
			return nil, fmt.Errorf("attach %s: %w", dev, err)
		}
		// Another process took it between GET_FREE and CONFIGURE.
	}
}

// loopOf returns the loop device attached to file img, or "": the one
// whose backing file is img's inode, whatever path it was attached by.
func loopOf(img string) string {
	var st unix.Stat_t
	if err := unix.Stat(img, &st); err != nil {
		return ""
	}
	attached, _ := filepath.Glob("/sys/block/loop*/loop")
	for _, p := range attached {
		dev := "/dev/" + filepath.Base(filepath.Dir(p))
		f, err := os.Open(dev)
		if err != nil {
			continue
		}
		info, err := unix.IoctlLoopGetStatus64(int(f.Fd()))
		f.Close()
		if err == nil && info.Inode == st.Ino && info.Device == st.Dev {
			return dev
		}
	}
	return ""
}

// canClone reports whether dir's filesystem clones files: nil if it does,
// an error saying why not.
func canClone(dir string) error {
	a, err := os.CreateTemp(dir, ".clone-test-")
	if err != nil {
		return err
	}
	defer os.Remove(a.Name())
	defer a.Close()
	if _, err := a.Write([]byte("clone")); err != nil {
		return err
	}
	b, err := os.CreateTemp(dir, ".clone-test-")
	if err != nil {
		return err
	}
	defer os.Remove(b.Name())
	defer b.Close()
	if err := unix.IoctlFileClone(int(b.Fd()), int(a.Fd())); err != nil {
		return fmt.Errorf("filesystem cannot clone files: %w", err)
	}
	return nil
}

func fsType(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Type, nil
}

// mountAt returns the mount at dir, if there is one.
func mountAt(dir string) (mountinfo.Mount, bool, error) {
	mounts, err := mountinfo.Read(mountinfo.Self)
	if err != nil {
		return mountinfo.Mount{}, false, err
	}
	for i := len(mounts) - 1; i >= 0; i-- { // the last one mounted there is the one seen
		if mounts[i].Point == dir {
			return mounts[i], true, nil
		}
	}
	return mountinfo.Mount{}, false, nil
}
