package sessions

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/publish"
)

// dataDirName is the data layer's directory in the Workspaces' directory.
const dataDirName = ".data"

// dataVersion names the rules data files were made under, in the layer's
// dataVersionFile: 2 since a data file holds exactly the content it is
// named for — cloned before capture reads the file, or after and then
// checked (publish.Clone.Make). The data files of version 1, cloned after
// and not checked, could hold other bytes.
const (
	dataVersion     = "2"
	dataVersionFile = "version"
)

// dataLayer is a directory of data files, one per content (named by its
// ID), each a clone of a big file a Workspace modified and committed: the
// data-only layer of every Workspace's overlay (lowerdir+ the Commit,
// datadir+ this directory). The Store's FUSE mount answers overlayfs that
// a file whose content has a data file is a metacopy whose data is there,
// so the overlay reads it there and copies it up by cloning it.
//
// Capture makes a data file (publish.DataLayer): a clone whose bytes are
// exactly the content it stored, kept under the content's name once the
// Commit lands and never written after. Data files take space on the
// volume beyond what their Workspaces needed (less where clones share
// blocks). Past max bytes the least recently announced ones go, as long
// as no overlay can still be about to open them (evict); past twice that,
// no more are kept until some can go.
type dataLayer struct {
	dir string
	max int64
	log func(format string, args ...any)
	// clock orders announcements and overlay mounts (tick): a counter, so
	// that no change of the wall clock can reorder them.
	clock atomic.Int64

	mu    sync.Mutex
	files map[object.ID]*dataFile
	bytes int64
	// making holds the data files being made after their Commit landed
	// (publish.Clone.Make), closed when each is done; made counts them
	// for the daemon's Close, after which (closed) none is made.
	making map[object.ID]chan struct{}
	made   sync.WaitGroup
	closed bool
}

type dataFile struct {
	size int64
	// announced is the tick at which the FUSE mount last told an overlay
	// to read the file here, or at which it was kept.
	announced int64
}

// openDataLayer opens the data layer at dir, making it if need be, and
// drops the clones an interrupted commit left.
func openDataLayer(dir string, max int64, log func(string, ...any)) (*dataLayer, error) {
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o700); err != nil {
		return nil, err
	}
	l := &dataLayer{dir: dir, max: max, log: log, files: map[object.ID]*dataFile{}, making: map[object.ID]chan struct{}{}}
	if left, err := os.ReadDir(filepath.Join(dir, "tmp")); err == nil {
		for _, e := range left {
			os.Remove(filepath.Join(dir, "tmp", e.Name()))
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	// Data files made under other rules are not trusted: dropped.
	version := filepath.Join(dir, dataVersionFile)
	if v, _ := os.ReadFile(version); string(v) != dataVersion {
		for _, e := range entries {
			if _, err := object.Parse(e.Name()); err == nil {
				os.Remove(filepath.Join(dir, e.Name()))
			}
		}
		if err := os.WriteFile(version, []byte(dataVersion), 0o600); err != nil {
			return nil, err
		}
		if entries, err = os.ReadDir(dir); err != nil {
			return nil, err
		}
	}
	now := l.tick() // no overlay older than this start may open one: none is counted
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

// holds reports whether the layer has a data file of id, or is making one.
func (l *dataLayer) holds(id object.ID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.files[id] != nil || l.making[id] != nil
}

// tmpName is a new name in the layer's tmp directory.
func (l *dataLayer) tmpName() string {
	var name [8]byte
	rand.Read(name[:])
	return filepath.Join(l.dir, "tmp", hex.EncodeToString(name[:]))
}

// tick returns the next tick of the layer's clock.
func (l *dataLayer) tick() int64 { return l.clock.Add(1) }

// redirect is the FUSE mount's fusefs.Options.DataRedirect: the path of
// id's data file in the data-only layer, or "" — also when the data file
// does not have the content's size, which no data file should lack.
//
// A data file still being made is waited for: without it, the copy-up of
// the file reads it all through the mount (20+ ms for 32 MiB, against
// ~1 ms for the clone).
func (l *dataLayer) redirect(id object.ID, size int64) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ch := l.making[id]; ch != nil {
		l.mu.Unlock()
		select {
		case <-ch:
		case <-time.After(makeWait):
		}
		l.mu.Lock()
	}
	f := l.files[id]
	if f == nil || f.size != size {
		return ""
	}
	f.announced = l.tick()
	return "/" + id.String()
}

// Clone implements publish.DataLayer: it clones f into the layer's tmp
// directory.
func (l *dataLayer) Clone(f *os.File) (string, error) {
	tmp := l.tmpName()
	dst, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o400)
	if err != nil {
		return "", err
	}
	err = unix.IoctlFileClone(int(dst.Fd()), int(f.Fd()))
	dst.Close()
	if err != nil {
		os.Remove(tmp)
		l.log("clone %s for a data file: %v", f.Name(), err)
		return "", err
	}
	return tmp, nil
}

// keep makes the clones data files of the content they hold, unless the
// layer holds more than twice its budget that evict could not drop.
func (l *dataLayer) keep(cs []publish.Clone) {
	for _, c := range cs {
		fi, err := os.Stat(c.Tmp)
		l.mu.Lock()
		if err != nil || l.files[c.ID] != nil || l.bytes+fi.Size() > 2*l.max {
			l.mu.Unlock()
			os.Remove(c.Tmp)
			continue
		}
		err = os.Rename(c.Tmp, l.path(c.ID))
		if err == nil {
			l.files[c.ID] = &dataFile{size: fi.Size(), announced: l.tick()}
			l.bytes += fi.Size()
		}
		l.mu.Unlock()
		if err != nil {
			os.Remove(c.Tmp)
		}
	}
}

// drop removes clones of a Commit that did not land.
func (l *dataLayer) drop(cs []publish.Clone) {
	for _, c := range cs {
		if c.Later() {
			c.Release()
		} else {
			os.Remove(c.Tmp)
		}
	}
}

// makeWait bounds how long a lookup waits for a data file being made.
const makeWait = 200 * time.Millisecond

// land keeps the clones of a Commit that landed: those made already at
// once, the others in the background (make).
func (l *dataLayer) land(cs []publish.Clone) {
	var now []publish.Clone
	for _, c := range cs {
		if c.Later() {
			l.make(c)
		} else {
			now = append(now, c)
		}
	}
	l.keep(now)
}

// make makes c's data file in the background, and keeps it if it holds
// c's content; lookups of that content wait for it meanwhile.
func (l *dataLayer) make(c publish.Clone) {
	l.mu.Lock()
	if l.closed || l.files[c.ID] != nil || l.making[c.ID] != nil {
		l.mu.Unlock()
		c.Release()
		return
	}
	done := make(chan struct{})
	l.making[c.ID] = done
	l.made.Add(1)
	l.mu.Unlock()
	go func() {
		defer l.made.Done()
		tmp, err := c.Make(l)
		if err != nil {
			l.log("%v", err)
		} else {
			l.keep([]publish.Clone{{Tmp: tmp, ID: c.ID}})
		}
		l.mu.Lock()
		delete(l.making, c.ID)
		l.mu.Unlock()
		close(done)
	}()
}

// evict removes data files, least recently announced first, while they
// take more than max bytes. Only files last announced before oldest, the
// tick at which the oldest overlay still mounted was mounted, may go:
// overlayfs opens a data file by its path at the first open after the
// lookup the FUSE mount answered, and an overlay mounted later than that
// answer never had it.
func (l *dataLayer) evict(oldest int64) {
	l.mu.Lock()
	if l.bytes <= l.max {
		l.mu.Unlock()
		return
	}
	type cand struct {
		id object.ID
		f  *dataFile
	}
	var cs []cand
	for id, f := range l.files {
		if f.announced < oldest {
			cs = append(cs, cand{id, f})
		}
	}
	slices.SortFunc(cs, func(a, b cand) int { return cmp.Compare(a.f.announced, b.f.announced) })
	// Each victim is renamed into tmp under the lock, so that a keep of
	// the same content can never find its new file removed, and unlinked
	// outside it: unlinking a big file frees its extents, and every
	// lookup of a big file takes the lock.
	var gone []string
	for _, c := range cs {
		if l.bytes <= l.max {
			break
		}
		aside := l.tmpName()
		if err := os.Rename(l.path(c.id), aside); err != nil && !errors.Is(err, os.ErrNotExist) {
			l.log("evict data file %s: %v", c.id.Short(), err)
			continue // still there: still usable
		}
		delete(l.files, c.id) // no longer announced, so no longer looked up
		l.bytes -= c.f.size
		gone = append(gone, aside)
	}
	l.mu.Unlock()
	for _, p := range gone {
		os.Remove(p)
	}
}

// close waits for the data files being made, and makes no more.
func (l *dataLayer) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.made.Wait()
}

// stats reports the data files and their bytes.
func (l *dataLayer) stats() (int, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.files), l.bytes
}

// tick is the data layer's next tick, or 0 when there is none.
func (d *Daemon) tick() int64 {
	if d.data == nil {
		return 0
	}
	return d.data.tick()
}

// dataDir is the data layer's directory, or "" when there is none.
func (d *Daemon) dataDir() string {
	if d.data == nil {
		return ""
	}
	return d.data.dir
}

// oldestView returns the tick at which the oldest overlay a command may be
// using was mounted: the data files announced before it are in no live
// overlay's lookups. Not counted: a view replaced while commands kept
// running in it (commit with allow_running, discard), whose later opens
// of big files they had not opened may fail once their data files go.
func (d *Daemon) oldestView() int64 {
	oldest := d.data.tick()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, w := range d.ws {
		if t := w.shown.Load(); t < oldest {
			oldest = t
		}
	}
	return oldest
}
