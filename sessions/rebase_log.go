package sessions

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs/internal/ovl"
)

// rebaseLog lists the changes a rebase makes to a Workspace's upperdir,
// written before the first is made, so that every one can be undone:
// by the rebase when a later step fails, and by a restart after a crash
// anywhere before the rewritten upperdir became the next generation's
// (rebase renames it, after the Store's Lease moved to the head), which
// would otherwise bring the Workspace back on its old lease with the
// head's text in its upperdir.
//
// Each change is a rename — of a file staged in the log's directory
// into the upperdir, or of an entry out of the upperdir to a name of its
// own there, kept until the rebase is done — or a directory made, or a
// directory made opaque, whose overlay xattrs the log holds as they
// were. The log's directory (rebase-<gen>, beside the upperdir, on its
// filesystem) goes once a newer generation is the Workspace's.
type rebaseLog struct {
	Gen   int          `json:"gen"`
	Steps []rebaseStep `json:"steps"`
	dir   string
}

// rebaseStep is one change to the upperdir; Path is upperdir-relative,
// slash-separated.
type rebaseStep struct {
	Op   string `json:"op"`
	Path string `json:"path"`
	// Had says, for stepWrite, that something was at Path before.
	Had bool `json:"had,omitempty"`
	// Redirect and Opaque are, for stepOpaque, the directory's overlay
	// xattrs before ("": none).
	Redirect string `json:"redirect,omitempty"`
	Opaque   string `json:"opaque,omitempty"`
}

// The steps' operations.
const (
	stepMkdir       = "mkdir"        // make a directory a stepWrite needs
	stepWrite       = "write"        // put the staged file in, keeping what was there
	stepRemove      = "remove"       // move the entry out, kept
	stepRemoveEmpty = "remove-empty" // the same, if it is an empty directory
	stepOpaque      = "opaque"       // make the directory opaque, without a redirect
)

// rebaseLogFile names the log in its directory.
const rebaseLogFile = "log.json"

// rebaseDir is the log's directory for the rebase of generation gen.
func (w *workspace) rebaseDir(gen int) string { return w.dir("rebase-" + strconv.Itoa(gen)) }

// newRebaseLog starts the log of a rebase of generation gen, in a fresh
// directory.
func (w *workspace) newRebaseLog(gen int) (*rebaseLog, error) {
	l := &rebaseLog{Gen: gen, dir: w.rebaseDir(gen)}
	if err := l.remove(); err != nil { // a failed rebase's, undone
		return nil, err
	}
	if err := os.Mkdir(l.dir, 0o700); err != nil {
		return nil, err
	}
	return l, nil
}

// staged is where step i's new file is written before it goes in; kept
// is where what was at step i's path goes.
func (l *rebaseLog) staged(i int) string { return filepath.Join(l.dir, "staged-"+strconv.Itoa(i)) }
func (l *rebaseLog) kept(i int) string   { return filepath.Join(l.dir, "kept-"+strconv.Itoa(i)) }

// add appends a step and returns its index.
func (l *rebaseLog) add(s rebaseStep) int {
	l.Steps = append(l.Steps, s)
	return len(l.Steps) - 1
}

// save writes the log: from then on, its steps may be made.
func (l *rebaseLog) save() error {
	data, err := json.Marshal(l)
	if err != nil {
		return err
	}
	tmp := filepath.Join(l.dir, rebaseLogFile+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("write the rebase's log: %w", err)
	}
	return os.Rename(tmp, filepath.Join(l.dir, rebaseLogFile))
}

// loadRebaseLog reads the log in dir; nil if there is none.
func loadRebaseLog(dir string) (*rebaseLog, error) {
	data, err := os.ReadFile(filepath.Join(dir, rebaseLogFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	l := &rebaseLog{dir: dir}
	if err := json.Unmarshal(data, l); err != nil {
		return nil, fmt.Errorf("rebase log %s: %w", dir, err)
	}
	return l, nil
}

// apply makes the steps in upper, in order.
func (l *rebaseLog) apply(upper string, logf func(string, ...any)) error {
	for i, s := range l.Steps {
		if err := failpoint(FailpointRebaseStep); err != nil {
			return err
		}
		if err := l.applyStep(i, s, upper, logf); err != nil {
			return fmt.Errorf("rebase %s: %s: %w", s.Op, s.Path, err)
		}
	}
	return nil
}

func (l *rebaseLog) applyStep(i int, s rebaseStep, upper string, logf func(string, ...any)) error {
	full := filepath.Join(upper, filepath.FromSlash(s.Path))
	switch s.Op {
	case stepMkdir:
		return mkdirL(full, 0o755)
	case stepWrite:
		if err := moveOut(full, l.kept(i)); err != nil {
			return err
		}
		return renameL(l.staged(i), full)
	case stepRemove:
		return moveOut(full, l.kept(i))
	case stepRemoveEmpty:
		if empty, err := dirEmpty(full); err != nil || !empty {
			return nil // gone, or not to go: it holds something
		}
		return moveOut(full, l.kept(i))
	case stepOpaque:
		if err := removexattrL(full, ovl.Redirect); err != nil && !errors.Is(err, unix.ENODATA) && !errors.Is(err, unix.ENOENT) {
			logf("make %s opaque: %v", s.Path, err)
		}
		if err := setxattrL(full, ovl.Opaque, []byte("y")); err != nil && !errors.Is(err, unix.ENOENT) {
			logf("make %s opaque: %v", s.Path, err)
		}
		return nil
	}
	return fmt.Errorf("unknown step")
}

// moveOut moves the entry at full to kept, if there is one.
func moveOut(full, kept string) error {
	if err := renameL(full, kept); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// undo takes upper back to what it was before the steps, whichever of
// them were made, in reverse order. Each undo can be done again: a crash
// in the middle of one leaves the log for the restart after it.
func (l *rebaseLog) undo(upper string) error {
	var errs []error
	for i := len(l.Steps) - 1; i >= 0; i-- {
		if err := l.undoStep(i, l.Steps[i], upper); err != nil {
			errs = append(errs, fmt.Errorf("undo the rebase's %s of %s: %w", l.Steps[i].Op, l.Steps[i].Path, err))
		}
	}
	return errors.Join(errs...)
}

func (l *rebaseLog) undoStep(i int, s rebaseStep, upper string) error {
	full := filepath.Join(upper, filepath.FromSlash(s.Path))
	switch s.Op {
	case stepMkdir:
		return goneOK(removeL(full))
	case stepWrite:
		if !s.Had {
			return goneOK(removeL(full)) // made by the step, if it was
		}
		return goneOK(renameL(l.kept(i), full))
	case stepRemove, stepRemoveEmpty:
		return goneOK(renameL(l.kept(i), full))
	case stepOpaque:
		return errors.Join(restoreXattr(full, ovl.Redirect, s.Redirect), restoreXattr(full, ovl.Opaque, s.Opaque))
	}
	return nil
}

// restoreXattr sets p's xattr name to value, or removes it if value is
// "".
func restoreXattr(p, name, value string) error {
	var err error
	if value == "" {
		if err = removexattrL(p, name); errors.Is(err, unix.ENODATA) {
			err = nil
		}
	} else {
		err = setxattrL(p, name, []byte(value))
	}
	return goneOK(err)
}

// undoInterruptedRebase undoes, at a restart, the rebase of the
// generation the record names if a crash interrupted it before its
// upperdir became the next generation's: the Workspace comes back as it
// was before the commit that met the conflict. A rebase that got further
// left the upperdir renamed (adoptMovedUpper takes it up), and its log
// goes with the old generations.
func (w *workspace) undoInterruptedRebase() error {
	l, err := loadRebaseLog(w.rebaseDir(w.rec.Gen))
	if err != nil || l == nil {
		return err
	}
	if _, err := os.Stat(w.upper()); err != nil {
		return nil // renamed: the rebase is done but for its record
	}
	if err := l.undo(w.upper()); err != nil {
		return fmt.Errorf("undo the rebase a crash interrupted (its log: %s): %w", l.dir, err)
	}
	w.logf("undid the rebase onto the head its commit met, which a crash interrupted: back on %.12s", w.rec.Lease)
	return l.remove()
}

// undoFailed undoes the steps of a rebase that failed, and removes the
// log. If a step cannot be undone, what the rebase moved out of the
// upperdir (kept-N) is still in the log's directory: that is moved aside
// (rebase-N.kept-T), its log removed so that nothing undoes it again over
// what commands write next, for the error to name; removed with the log,
// the Workspace's own version of a conflicting file was lost.
func (l *rebaseLog) undoFailed(upper string) error {
	err := l.undo(upper)
	if err == nil {
		return l.remove()
	}
	if rerr := os.Remove(filepath.Join(l.dir, rebaseLogFile)); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		return errors.Join(err, rerr)
	}
	aside := fmt.Sprintf("%s.kept-%d", l.dir, time.Now().UnixNano())
	if rerr := os.Rename(l.dir, aside); rerr != nil {
		return errors.Join(err, fmt.Errorf("what the rebase moved out of the upperdir stays in %s: %w", l.dir, rerr))
	}
	return fmt.Errorf("%w; what the rebase moved out of the upperdir is kept in %s", err, aside)
}

// remove removes the log, once its steps are undone: never to be undone
// again, over what commands write next. Not in the background: the next
// rebase of the generation makes the directory again.
func (l *rebaseLog) remove() error {
	if err := os.Remove(filepath.Join(l.dir, rebaseLogFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.RemoveAll(l.dir)
}
