package layerfs

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/layerfs/layerfs/extents"
	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/publish"
	"github.com/layerfs/layerfs/store"
)

// Result is how a mutating call ended: Committed, UpToDate or Conflict.
type Result = publish.Result

// Call describes one mutating call. Every field is optional.
type Call struct {
	// ID names the operation; the Commit's origin is "operation:<ID>".
	// Empty: a random ID.
	ID string
	// Message for the Commit; empty: a summary of the call.
	Message string
	// Base is the commit the call was made against; zero: the FS's base.
	Base object.ID
}

// Batch groups changes into one Commit. Its reads see its own changes.
type Batch struct {
	f       *FS
	s       *store.Store
	stage   *store.Stage
	root    object.ID // the base commit's tree
	changes map[string]*publish.Change
	order   []string
	now     int64
	summary []string
}

// Batch runs fn and lands everything it changed as one Commit. If fn
// returns an error, nothing is written.
func (f *FS) Batch(fn func(b *Batch) error, call ...Call) (*Result, error) {
	if f.branch == "" {
		return nil, fmt.Errorf("%s: %w", f.ref, ErrReadOnlyFS)
	}
	c := callOf(call)
	base := c.Base
	if base.IsZero() {
		base = f.Base()
	}
	bc, err := f.st.s.Commit(base)
	if err != nil {
		return nil, fmt.Errorf("base: %w", err)
	}
	b := &Batch{f: f, s: f.st.s, stage: f.st.s.NewStage(), root: bc.Tree,
		changes: map[string]*publish.Change{}, now: time.Now().UnixNano()}
	if err := fn(b); err != nil {
		return nil, err
	}
	return b.publish(base, c)
}

func callOf(call []Call) Call {
	if len(call) > 0 {
		return call[0]
	}
	return Call{}
}

func (b *Batch) publish(base object.ID, c Call) (*Result, error) {
	cs := &publish.Changeset{Base: base}
	for _, p := range b.order {
		if ch := b.changes[p]; ch != nil {
			cs.Changes = append(cs.Changes, *ch)
		}
	}
	if c.ID == "" {
		c.ID = newOperationID()
	}
	if c.Message == "" {
		c.Message = strings.Join(b.summary, "; ")
	}
	res, err := publish.Publish(b.s, b.f.branch, cs, b.stage, publish.Meta{
		Origin: store.OriginOperation + c.ID, Message: c.Message, Time: b.now})
	if err != nil {
		return nil, err
	}
	switch res.Status {
	case publish.Committed:
		b.f.SetBase(res.Commit)
	case publish.UpToDate:
		b.f.SetBase(res.Head)
	}
	return res, nil
}

func newOperationID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// set records the new state of p.
func (b *Batch) set(p string, ch *publish.Change) {
	ch.Path = p
	if _, ok := b.changes[p]; !ok {
		b.order = append(b.order, p)
	}
	b.changes[p] = ch
}

// lookup finds p as the batch sees it: its own changes over the base tree.
func (b *Batch) lookup(p string) (store.Entry, bool, error) {
	parts, err := store.SplitPath(p)
	if err != nil {
		return store.Entry{}, false, err
	}
	if len(parts) == 0 {
		return store.RootEntry(b.root), true, nil
	}
	tree, from := b.root, 0 // resolve parts[from:] below tree
	for i := range parts {
		ch, ok := b.changes[strings.Join(parts[:i+1], "/")]
		if !ok {
			continue
		}
		last := i == len(parts)-1
		switch e := ch.Entry; {
		case e == nil:
			return store.Entry{}, false, nil
		case last:
			return *e, true, nil
		case e.Type != store.TypeDir:
			return store.Entry{}, false, nil
		case !e.ID.IsZero():
			tree, from = e.ID, i+1
		case ch.Opaque:
			tree, from = object.Zero, i+1
		}
	}
	if tree.IsZero() {
		return store.Entry{}, false, nil
	}
	e, err := b.s.Lookup(tree, strings.Join(parts[from:], "/"))
	if errors.Is(err, store.ErrNotFound) {
		return store.Entry{}, false, nil
	}
	return e, err == nil, err
}

// checkParent refuses a path whose parent exists and is not a directory.
func (b *Batch) checkParent(p string) error {
	dir := parentOf(p)
	for dir != "" {
		e, ok, err := b.lookup(dir)
		if err != nil {
			return err
		}
		if ok && e.Type != store.TypeDir {
			return fmt.Errorf("%s: parent %s is a %s: %w", p, dir, e.Type, ErrNotDir)
		}
		if ok {
			return nil
		}
		dir = parentOf(dir)
	}
	return nil
}

func parentOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

// file returns the regular file at p, or an error naming what is there.
func (b *Batch) file(p string) (store.Entry, error) {
	e, ok, err := b.lookup(p)
	switch {
	case err != nil:
		return e, err
	case !ok:
		return e, fmt.Errorf("%s: %w", p, store.ErrNotFound)
	case e.Type == store.TypeDir:
		return e, fmt.Errorf("%s: %w", p, ErrIsDir)
	case e.Type == store.TypeSymlink:
		return e, fmt.Errorf("%s: %w (to %q)", p, ErrIsSymlink, e.Target)
	}
	return e, nil
}

// Read returns a file's contents as the batch sees them.
func (b *Batch) Read(p string) ([]byte, error) {
	e, err := b.file(p)
	if err != nil {
		return nil, err
	}
	return readEntry(b.stage, &e, p)
}

// putFile records new content for p, keeping its metadata when it existed.
// Unchanged content changes nothing (not even the mtime).
func (b *Batch) putFile(p string, old *store.Entry, f extents.File) {
	if old != nil && old.Type == store.TypeFile && old.ID == f.ID && old.Size == f.Size {
		return
	}
	e := store.Entry{Type: store.TypeFile, Mode: 0o644, UID: uint32(os.Geteuid()), GID: uint32(os.Getegid())}
	if old != nil && old.Type == store.TypeFile {
		e = *old
	}
	e.ID, e.Size, e.MTime = f.ID, f.Size, b.now
	b.set(p, &publish.Change{Entry: &e})
}

func (b *Batch) note(format string, args ...any) {
	b.summary = append(b.summary, fmt.Sprintf(format, args...))
}
