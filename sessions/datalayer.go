package sessions

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/publish"
)

// dataDirName is the data layer's directory in the Workspaces' directory.
const dataDirName = ".data"

// dataLayer is a directory of data files, one per content (named by its
// ID), each a clone of a big file a Workspace committed: the data-only
// layer of every Workspace's overlay (lowerdir+ the Commit, datadir+ this
// directory). The Store's FUSE mount answers overlayfs that a file whose
// content has a data file is a metacopy whose data is there, so the
// overlay reads it there and copies it up by cloning it.
//
// A data file is made only by cloning an upper file capture has just read
// and only kept if the upper file did not change meanwhile, is never
// written after, and is named by the content it holds. Data files take
// space on the volume beyond what their Commits' Workspaces needed (less
// where clones share blocks); past max bytes the least recently announced
// ones go, when no overlay can still be about to open them (evict).
type dataLayer struct {
	dir string
	max int64

	mu    sync.Mutex
	files map[object.ID]*dataFile
	bytes int64
}

type dataFile struct {
	size int64
	// announced is when the FUSE mount last told an overlay to read the
	// file here.
	announced time.Time
}

// openDataLayer opens the data layer at dir, making it if need be, and
// drops the clones an interrupted commit left.
func openDataLayer(dir string, max int64) (*dataLayer, error) {
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o700); err != nil {
		return nil, err
	}
	l := &dataLayer{dir: dir, max: max, files: map[object.ID]*dataFile{}}
	if left, err := os.ReadDir(filepath.Join(dir, "tmp")); err == nil {
		for _, e := range left {
			os.Remove(filepath.Join(dir, "tmp", e.Name()))
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	now := time.Now() // a restarted daemon's overlays may have any of them looked up
	for _, e := range entries {
		id, err := object.Parse(e.Name())
		if err != nil {
			continue // tmp
		}
		fi, err := e.Info()
		if err != nil {
			return nil, err
		}
		l.files[id] = &dataFile{size: fi.Size(), announced: now}
		l.bytes += fi.Size()
	}
	return l, nil
}

func (l *dataLayer) path(id object.ID) string { return filepath.Join(l.dir, id.String()) }

// DataFile implements publish.DataLayer.
func (l *dataLayer) DataFile(id object.ID) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.files[id] == nil {
		return ""
	}
	return l.path(id)
}

// redirect is the FUSE mount's fusefs.Options.DataRedirect: the path of
// id's data file in the data-only layer, or "".
func (l *dataLayer) redirect(id object.ID) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.files[id]
	if f == nil {
		return ""
	}
	f.announced = time.Now()
	return "/" + id.String()
}

// A clone is a data file in the making: a clone of a captured big file,
// kept (renamed to its content's name) once its Commit has landed.
type clone struct {
	tmp  string
	id   object.ID
	size int64
}

// clone clones the captured big files into the data layer's tmp
// directory. A file whose ctime moved since capture read it (it was
// written since) is skipped: its bytes may not be the captured content.
func (l *dataLayer) clone(big []publish.BigFile) []clone {
	var out []clone
	for _, b := range big {
		if l.DataFile(b.ID) != "" {
			continue
		}
		c, err := l.cloneOne(b)
		if err != nil {
			continue // no data file: its copy-ups read the FUSE mount
		}
		out = append(out, c)
	}
	return out
}

func (l *dataLayer) cloneOne(b publish.BigFile) (clone, error) {
	src, err := os.Open(b.Abs)
	if err != nil {
		return clone{}, err
	}
	defer src.Close()
	var name [8]byte
	rand.Read(name[:])
	tmp := filepath.Join(l.dir, "tmp", hex.EncodeToString(name[:]))
	dst, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o400)
	if err != nil {
		return clone{}, err
	}
	err = unix.IoctlFileClone(int(dst.Fd()), int(src.Fd()))
	dst.Close()
	var st unix.Stat_t
	if err == nil {
		err = unix.Fstat(int(src.Fd()), &st)
	}
	if err == nil && (st.Ctim != b.Ctime || st.Size != b.Size) {
		err = errors.New("written since capture")
	}
	if err != nil {
		os.Remove(tmp)
		return clone{}, fmt.Errorf("clone %s: %w", b.Abs, err)
	}
	return clone{tmp: tmp, id: b.ID, size: b.Size}, nil
}

// keep makes the clones data files.
func (l *dataLayer) keep(cs []clone) {
	for _, c := range cs {
		l.mu.Lock()
		if l.files[c.id] != nil {
			l.mu.Unlock()
			os.Remove(c.tmp)
			continue
		}
		err := os.Rename(c.tmp, l.path(c.id))
		if err == nil {
			l.files[c.id] = &dataFile{size: c.size}
			l.bytes += c.size
		}
		l.mu.Unlock()
		if err != nil {
			os.Remove(c.tmp)
		}
	}
}

// drop removes clones of a Commit that did not land.
func (l *dataLayer) drop(cs []clone) {
	for _, c := range cs {
		os.Remove(c.tmp)
	}
}

// evict removes data files, least recently announced first, while they
// take more than max bytes. Only files last announced before oldest, when
// the oldest overlay still mounted was mounted, may go: overlayfs opens a
// data file by path at the first open after the lookup the FUSE mount
// answered, and an overlay mounted later than that answer never had it.
func (l *dataLayer) evict(oldest time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.bytes <= l.max {
		return
	}
	type cand struct {
		id object.ID
		f  *dataFile
	}
	var cs []cand
	for id, f := range l.files {
		if f.announced.Before(oldest) {
			cs = append(cs, cand{id, f})
		}
	}
	slices.SortFunc(cs, func(a, b cand) int { return a.f.announced.Compare(b.f.announced) })
	for _, c := range cs {
		if l.bytes <= l.max {
			break
		}
		delete(l.files, c.id)
		l.bytes -= c.f.size
		os.Remove(l.path(c.id))
	}
}

// stats reports the data files and their bytes.
func (l *dataLayer) stats() (int, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.files), l.bytes
}

// dataDir is the data layer's directory, or "" when there is none.
func (d *Daemon) dataDir() string {
	if d.data == nil {
		return ""
	}
	return d.data.dir
}

// oldestView returns when the oldest overlay a command may be using was
// mounted: the data files announced before it are in no live overlay's
// lookups. (A view a commit replaced while a command kept running in it,
// allow_running, is not counted.)
func (d *Daemon) oldestView() time.Time {
	oldest := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, w := range d.ws {
		if t := time.Unix(0, w.shown.Load()); t.Before(oldest) {
			oldest = t
		}
	}
	return oldest
}
