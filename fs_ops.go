package layerfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/layerfs/layerfs/extents"
	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/publish"
	"github.com/layerfs/layerfs/store"
)

// Write creates or replaces the file at p with data. Missing parent
// directories are created.
func (b *Batch) Write(p string, data []byte) error {
	old, exists, err := b.writable(p)
	if err != nil {
		return err
	}
	f, err := extents.WriteBytes(b.stage, data)
	if err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	b.putFile(p, entryIf(old, exists), f)
	b.note("write %s", p)
	return nil
}

// writable checks that p may hold a file and returns what is there now.
func (b *Batch) writable(p string) (store.Entry, bool, error) {
	if err := checkFilePath(p); err != nil {
		return store.Entry{}, false, err
	}
	old, exists, err := b.lookup(p)
	if err != nil {
		return old, exists, err
	}
	if exists && old.Type == store.TypeDir {
		return old, exists, fmt.Errorf("write %s: %w", p, ErrIsDir)
	}
	if exists && old.Type == store.TypeSymlink {
		// Not replaced by a file, silently; nor written through, which
		// a target outside the tree could not be.
		return old, exists, fmt.Errorf("write %s: %w (to %q): write its target, or remove it first", p, ErrIsSymlink, old.Target)
	}
	return old, exists, b.checkParent(p)
}

func checkFilePath(p string) error {
	parts, err := store.SplitPath(p)
	if err != nil {
		return err
	}
	if len(parts) == 0 {
		return fmt.Errorf("the root is a directory: %w", store.ErrBadPath)
	}
	return nil
}

func entryIf(e store.Entry, ok bool) *store.Entry {
	if !ok {
		return nil
	}
	return &e
}

// WriteAt writes data at offset off of an existing file (pwrite: a gap
// past the end reads as zeros). It costs about the size of data, whatever
// the file's size.
func (b *Batch) WriteAt(p string, off int64, data []byte) error {
	return b.edit(p, fmt.Sprintf("write %d bytes at %d of %s", len(data), off, p), func(f extents.File) (extents.File, error) {
		if off < 0 {
			return f, fmt.Errorf("write at negative offset %d: %w", off, ErrBadOffset)
		}
		return extents.Overwrite(b.stage, f, off, data)
	})
}

// Append adds data at the end of a file, creating it if missing.
func (b *Batch) Append(p string, data []byte) error {
	if _, exists, err := b.writable(p); err != nil {
		return err
	} else if !exists {
		return b.Write(p, data)
	}
	return b.edit(p, "append to "+p, func(f extents.File) (extents.File, error) {
		return extents.Append(b.stage, f, data)
	})
}

// Truncate sets a file's size, cutting it or extending it with zeros.
func (b *Batch) Truncate(p string, size int64) error {
	return b.edit(p, fmt.Sprintf("truncate %s to %d", p, size), func(f extents.File) (extents.File, error) {
		if size < 0 {
			return f, fmt.Errorf("truncate to negative size %d: %w", size, store.ErrBadPath)
		}
		return extents.Truncate(b.stage, f, size)
	})
}

// edit applies fn to an existing file's content.
func (b *Batch) edit(p, what string, fn func(extents.File) (extents.File, error)) error {
	old, err := b.file(p)
	if err != nil {
		return err
	}
	f, err := fn(extents.File{ID: old.ID, Size: old.Size})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	b.putFile(p, &old, f)
	b.note("%s", what)
	return nil
}

// Edit replaces old with new in a text file, as agents' edit tools do: old
// must occur exactly once, or at least once when all is set.
func (b *Batch) Edit(p, old, new string, all bool) error {
	if old == "" {
		return fmt.Errorf("edit %s: %w", p, ErrEmptyEdit)
	}
	e, err := b.file(p)
	if err != nil {
		return fmt.Errorf("edit %s: %w", p, err)
	}
	data, err := readEntry(b.stage, &e, p)
	if err != nil {
		return err
	}
	if !IsText(data) {
		return fmt.Errorf("edit %s: %w: text replacement needs a text file", p, ErrBinary)
	}
	n := strings.Count(string(data), old)
	switch {
	case n == 0:
		return fmt.Errorf("edit %s: %w", p, ErrNoMatch)
	case n > 1 && !all:
		return fmt.Errorf("edit %s: the text occurs %d times; add context to make it unique, or replace all: %w", p, n, ErrManyMatch)
	}
	repl := 1
	if all {
		repl = -1
	}
	f, err := extents.WriteBytes(b.stage, []byte(strings.Replace(string(data), old, new, repl)))
	if err != nil {
		return fmt.Errorf("edit %s: %w", p, err)
	}
	b.putFile(p, &e, f)
	b.note("edit %s", p)
	return nil
}

// IsText reports whether data looks like text: no NUL byte in its first
// textProbe bytes (git's test).
func IsText(data []byte) bool {
	return bytes.IndexByte(data[:min(len(data), textProbe)], 0) < 0
}

// textProbe is how much of a file IsText looks at.
const textProbe = 8000

// Delete removes a file, symlink or directory tree.
func (b *Batch) Delete(p string) error {
	if err := checkFilePath(p); err != nil {
		return err
	}
	if _, ok, err := b.lookup(p); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("delete %s: %w", p, store.ErrNotFound)
	}
	b.set(p, &publish.Change{})
	b.note("delete %s", p)
	return nil
}

// Move renames from to to, which must not exist.
func (b *Batch) Move(from, to string) error {
	for _, p := range []string{from, to} {
		if err := checkFilePath(p); err != nil {
			return err
		}
	}
	e, ok, err := b.lookup(from)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("move %s: %w", from, store.ErrNotFound)
	}
	if strings.HasPrefix(to+"/", from+"/") {
		if to == from {
			return fmt.Errorf("move %s onto itself: %w", from, store.ErrBadPath)
		}
		if e.Type != store.TypeDir {
			return fmt.Errorf("move %s to %s: %s is not a directory: %w", from, to, from, store.ErrBadPath)
		}
		return fmt.Errorf("move %s into itself (%s): %w", from, to, store.ErrBadPath)
	}
	if _, exists, err := b.lookup(to); err != nil || exists {
		if exists {
			err = fmt.Errorf("move %s to %s: %w", from, to, ErrExists)
		}
		return err
	}
	if err := b.checkParent(to); err != nil {
		return err
	}
	b.set(from, &publish.Change{})
	b.set(to, &publish.Change{Entry: &e, From: from})
	b.note("move %s to %s", from, to)
	return nil
}

// Mkdir creates a directory and any missing parents; an existing
// directory is left as it is.
func (b *Batch) Mkdir(p string) error {
	if err := checkFilePath(p); err != nil {
		return err
	}
	e, ok, err := b.lookup(p)
	switch {
	case err != nil:
		return err
	case ok && e.Type == store.TypeDir:
		return nil
	case ok:
		return fmt.Errorf("mkdir %s: %w", p, ErrExists)
	}
	if err := b.checkParent(p); err != nil {
		return err
	}
	b.set(p, &publish.Change{Entry: &store.Entry{Type: store.TypeDir, Mode: 0o755,
		UID: uint32(os.Geteuid()), GID: uint32(os.Getegid()), MTime: b.now}})
	b.note("mkdir %s", p)
	return nil
}

// Symlink creates a symbolic link at p pointing to target.
func (b *Batch) Symlink(p, target string) error {
	if target == "" || strings.IndexByte(target, 0) >= 0 {
		return fmt.Errorf("symlink %s: empty target or NUL byte: %w", p, store.ErrBadPath)
	}
	if _, exists, err := b.writable(p); exists && (err == nil || errors.Is(err, ErrIsSymlink)) {
		return fmt.Errorf("symlink %s: %w", p, ErrExists)
	} else if err != nil {
		return err
	}
	b.set(p, &publish.Change{Entry: &store.Entry{Type: store.TypeSymlink, Mode: 0o777, Target: target,
		Size: int64(len(target)), UID: uint32(os.Geteuid()), GID: uint32(os.Getegid()), MTime: b.now}})
	b.note("symlink %s", p)
	return nil
}

// Chmod sets the permission bits (with setuid, setgid, sticky) of p.
func (b *Batch) Chmod(p string, mode uint32) error {
	if mode&^07777 != 0 {
		return fmt.Errorf("chmod %s: mode %o has bits beyond 07777: %w", p, mode, store.ErrBadPath)
	}
	if err := checkFilePath(p); err != nil {
		return err
	}
	e, ok, err := b.lookup(p)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("chmod %s: %w", p, store.ErrNotFound)
	}
	if e.Type == store.TypeSymlink || e.Mode == mode {
		return nil
	}
	e.Mode = mode
	if prev, ok := b.changes[p]; e.Type == store.TypeDir && !(ok && prev.Entry != nil) {
		// The directory as the base has it: keep whatever children the
		// branch holds when the change lands, not a snapshot of them.
		e.ID = object.Zero
	}
	b.set(p, &publish.Change{Entry: &e})
	b.note("chmod %o %s", mode, p)
	return nil
}
