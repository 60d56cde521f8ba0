package layerfs

import (
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/layerfs/layerfs/extents"
	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// FS runs file calls against one ref, in the caller's process. On a branch
// every read sees the current head and remembers it as the base of the
// next mutating call; every mutating call is one atomic Commit. On a commit
// or layer the FS is read-only and never moves.
type FS struct {
	st     *Store
	ref    string
	branch string // "" when pinned to a commit or layer

	mu   sync.Mutex
	base object.ID
}

// Errors of file calls, besides store.ErrNotFound and store.ErrBadPath.
var (
	ErrIsDir      = errors.New("is a directory")
	ErrIsSymlink  = errors.New("is a symlink")
	ErrNotDir     = errors.New("not a directory")
	ErrExists     = errors.New("file exists")
	ErrBinary     = errors.New("binary file")
	ErrNoMatch    = errors.New("text not found")
	ErrManyMatch  = errors.New("text occurs more than once")
	ErrReadOnlyFS = errors.New("read-only: not a branch")
	ErrBadOffset  = errors.New("bad offset")
	ErrEmptyEdit  = errors.New("the text to replace is empty")
)

// FS opens file calls on ref: a branch (read-write), or a commit or layer
// (read-only).
func (st *Store) FS(ref string) (*FS, error) {
	r, err := st.s.Resolve(ref)
	if err != nil {
		return nil, err
	}
	f := &FS{st: st, ref: ref, base: r.Commit}
	if r.Kind == store.RefBranch {
		f.branch = r.Branch
	}
	return f, nil
}

// Ref is the ref the FS was opened on.
func (f *FS) Ref() string { return f.ref }

// Base is the commit the next mutating call is made against: the one the
// caller last read.
func (f *FS) Base() object.ID {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.base
}

// SetBase makes id the base of the next mutating call.
func (f *FS) SetBase(id object.ID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.base = id
}

// view returns the commit reads see: the branch head (which becomes the
// base), or the pinned commit.
func (f *FS) view() (object.ID, object.ID, error) {
	commit := f.Base()
	if f.branch != "" {
		b, err := f.st.s.Branch(f.branch)
		if err != nil {
			return object.Zero, object.Zero, err
		}
		commit = b.Head
		f.SetBase(commit)
	}
	c, err := f.st.s.Commit(commit)
	if err != nil {
		return object.Zero, object.Zero, err
	}
	return c.Tree, commit, nil
}

// FileInfo describes one path.
type FileInfo struct {
	Path   string          `json:"path"`
	Name   string          `json:"name"`
	Type   store.EntryType `json:"-"`
	Kind   string          `json:"type"`
	Mode   uint32          `json:"mode"`
	UID    uint32          `json:"uid"`
	GID    uint32          `json:"gid"`
	Size   int64           `json:"size"`
	MTime  time.Time       `json:"mtime"`
	ID     object.ID       `json:"-"`
	Target string          `json:"target,omitempty"`
}

func infoOf(p string, e *store.Entry) FileInfo {
	name := e.Name
	if name == "" {
		name = path.Base(p)
	}
	return FileInfo{Path: p, Name: name, Type: e.Type, Kind: e.Type.String(), Mode: e.Mode, UID: e.UID, GID: e.GID,
		Size: e.Size, MTime: time.Unix(0, e.MTime), ID: e.ID, Target: e.Target}
}

// Stat describes the entry at p ("" or "." is the root).
func (f *FS) Stat(p string) (FileInfo, error) {
	root, _, err := f.view()
	if err != nil {
		return FileInfo{}, err
	}
	e, err := f.st.s.Lookup(root, p)
	if err != nil {
		return FileInfo{}, err
	}
	return infoOf(p, &e), nil
}

// Exists reports whether p exists.
func (f *FS) Exists(p string) (bool, error) {
	_, err := f.Stat(p)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Read returns a file's contents.
func (f *FS) Read(p string) ([]byte, error) {
	root, _, err := f.view()
	if err != nil {
		return nil, err
	}
	return readFile(f.st.s, root, p)
}

// Reader returns a reader of a file's contents, which reads them from the
// Store as it goes: Read holds a whole file in memory. A symlink reads as
// its target, as with Read.
func (f *FS) Reader(p string) (*io.SectionReader, error) {
	root, _, err := f.view()
	if err != nil {
		return nil, err
	}
	e, err := f.st.s.Lookup(root, p)
	if err != nil {
		return nil, err
	}
	return entryReader(f.st.s, &e, p)
}

func readFile(s *store.Store, root object.ID, p string) ([]byte, error) {
	e, err := s.Lookup(root, p)
	if err != nil {
		return nil, err
	}
	return readEntry(s, &e, p)
}

// entryReader reads the content of a file entry, or a symlink's target.
func entryReader(g extents.Getter, e *store.Entry, p string) (*io.SectionReader, error) {
	switch e.Type {
	case store.TypeDir:
		return nil, fmt.Errorf("read %s: %w", p, ErrIsDir)
	case store.TypeSymlink:
		return io.NewSectionReader(strings.NewReader(e.Target), 0, int64(len(e.Target))), nil
	}
	return io.NewSectionReader(extents.NewReader(g, extents.File{ID: e.ID, Size: e.Size}), 0, e.Size), nil
}

func readEntry(g extents.Getter, e *store.Entry, p string) ([]byte, error) {
	r, err := entryReader(g, e, p)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, r.Size())
	n, err := r.ReadAt(buf, 0)
	if err != nil && !(errors.Is(err, io.EOF) && int64(n) == r.Size()) {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	return buf, nil
}

// List describes the entries of directory dir, sorted by name.
func (f *FS) List(dir string) ([]FileInfo, error) {
	root, _, err := f.view()
	if err != nil {
		return nil, err
	}
	e, err := f.st.s.Lookup(root, dir)
	if err != nil {
		return nil, err
	}
	if e.Type != store.TypeDir {
		return nil, fmt.Errorf("list %s: %w", dir, ErrNotDir)
	}
	t, err := f.st.s.Tree(e.ID)
	if err != nil {
		return nil, err
	}
	out := make([]FileInfo, len(t.Entries))
	for i := range t.Entries {
		out[i] = infoOf(joinRel(cleanDir(dir), t.Entries[i].Name), &t.Entries[i])
	}
	return out, nil
}

func cleanDir(dir string) string {
	if dir == "." {
		return ""
	}
	return dir
}

// Glob returns the paths matching pattern, sorted. Components match as in
// path.Match; a "**" component matches any number of directories.
func (f *FS) Glob(pattern string) ([]string, error) {
	if _, err := path.Match(strings.ReplaceAll(pattern, "**", "*"), ""); err != nil {
		return nil, fmt.Errorf("glob %q: %w", pattern, err)
	}
	root, _, err := f.view()
	if err != nil {
		return nil, err
	}
	var out []string
	err = globDir(f.st.s, root, "", strings.Split(strings.Trim(pattern, "/"), "/"), &out)
	sort.Strings(out)
	return out, err
}

func globDir(s *store.Store, tree object.ID, dir string, parts []string, out *[]string) error {
	t, err := s.Tree(tree)
	if err != nil {
		return err
	}
	if parts[0] == "**" {
		if len(parts) > 1 {
			if err := globDir(s, tree, dir, parts[1:], out); err != nil {
				return err
			}
		}
		for i := range t.Entries {
			e := &t.Entries[i]
			if len(parts) == 1 {
				*out = append(*out, joinRel(dir, e.Name))
			}
			if e.Type == store.TypeDir {
				if err := globDir(s, e.ID, joinRel(dir, e.Name), parts, out); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for i := range t.Entries {
		e := &t.Entries[i]
		if ok, _ := path.Match(parts[0], e.Name); !ok {
			continue
		}
		p := joinRel(dir, e.Name)
		switch {
		case len(parts) == 1:
			*out = append(*out, p)
		case e.Type == store.TypeDir:
			if err := globDir(s, e.ID, p, parts[1:], out); err != nil {
				return err
			}
		}
	}
	return nil
}
