package store

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/layerfs/layerfs/object"
)

// Branch is a named, movable pointer to a Commit.
type Branch struct {
	Name    string
	Head    object.ID
	Start   string // the ref it was forked from
	Created time.Time
	Updated time.Time
}

// LayerRef is one row of main's manifest.
type LayerRef struct {
	Seq     int64
	ID      object.ID // the layer object
	Commit  object.ID
	Created time.Time
}

// Name is the short form people type: L and the sequence number.
func (l LayerRef) Name() string { return fmt.Sprintf("L%06d", l.Seq) }

var branchName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._/-]*$`)
var layerName = regexp.MustCompile(`^L[0-9]+$`)

// CheckBranchName refuses names that could be mistaken for other refs or
// paths.
func CheckBranchName(name string) error {
	switch {
	case len(name) > 200:
		return fmt.Errorf("branch name %q: longer than 200 bytes: %w", name, ErrBadName)
	case name == "" || !branchName.MatchString(name[:1]):
		return fmt.Errorf("branch name %q: must start with a letter, digit or _: %w", name, ErrBadName)
	case !branchName.MatchString(name):
		return fmt.Errorf("branch name %q: use only letters, digits, and . _ / -: %w", name, ErrBadName)
	case strings.Contains(name, "..") || strings.Contains(name, "//") || strings.HasSuffix(name, "/"):
		return fmt.Errorf("branch name %q: no '..', '//' or trailing '/': %w", name, ErrBadName)
	case layerName.MatchString(name):
		return fmt.Errorf("branch name %q: reads as a layer ref: %w", name, ErrBadName)
	case strings.ContainsAny(name, "~^:"):
		return fmt.Errorf("branch name %q: %w", name, ErrBadName)
	}
	return nil
}

// checkNewBranchName is CheckBranchName for a branch about to be made,
// which may not read as a commit id prefix either: refs resolve to a
// branch first, so it would hide the commits and layers whose ids start
// so, now or later. Branches made before this rule keep working.
func checkNewBranchName(name string) error {
	if err := CheckBranchName(name); err != nil {
		return err
	}
	if hexRef.MatchString(name) {
		return fmt.Errorf("branch name %q: reads as a commit id prefix (4 to 64 hex digits): %w", name, ErrBadName)
	}
	return nil
}

func scanBranch(sc interface{ Scan(...any) error }) (Branch, error) {
	var b Branch
	var head []byte
	var created, updated int64
	if err := sc.Scan(&b.Name, &head, &b.Start, &created, &updated); err != nil {
		return b, err
	}
	b.Created, b.Updated = time.Unix(0, created), time.Unix(0, updated)
	var err error
	if b.Head, err = object.FromBytes(head); err != nil {
		return b, fmt.Errorf("branch %q: head: %w: %w", b.Name, ErrCorrupt, err)
	}
	return b, nil
}

// Branches lists every branch by name.
func (s *Store) Branches() ([]Branch, error) { return s.branches(nil) }

// branches lists every branch by name. A damaged row (ErrCorrupt) fails
// the listing, or, with damaged set, goes to it and is left out.
func (s *Store) branches(damaged func(name string, err error)) ([]Branch, error) {
	rows, err := s.r.Query(`SELECT name, head, start, created, updated FROM branches ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list branches: %w", err)
	}
	defer rows.Close()
	var out []Branch
	for rows.Next() {
		b, err := scanBranch(rows)
		if err != nil {
			if damaged == nil || !errors.Is(err, ErrCorrupt) {
				return nil, fmt.Errorf("list branches: %w", err)
			}
			damaged(b.Name, err)
			continue
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// Branch returns one branch.
func (s *Store) Branch(name string) (Branch, error) {
	b, err := scanBranch(s.stmts.branch.QueryRow(name))
	if errors.Is(err, sql.ErrNoRows) {
		return b, fmt.Errorf("branch %q: %w", name, ErrNotFound)
	}
	return b, err
}

// Layers lists main's manifest, newest first: the visible layers (a
// squashed run shows as the one layer that folds it).
func (s *Store) Layers() ([]LayerRef, error) {
	rows, err := s.r.Query(`SELECT seq, layer, commit_id, created FROM manifest WHERE squashed_into IS NULL ORDER BY seq DESC`)
	if err != nil {
		return nil, fmt.Errorf("list layers: %w", err)
	}
	defer rows.Close()
	var out []LayerRef
	for rows.Next() {
		var l LayerRef
		var id, commit []byte
		var created int64
		if err := rows.Scan(&l.Seq, &id, &commit, &created); err != nil {
			return nil, fmt.Errorf("list layers: %w", err)
		}
		l.ID, _ = object.FromBytes(id)
		l.Commit, _ = object.FromBytes(commit)
		l.Created = time.Unix(0, created)
		out = append(out, l)
	}
	return out, rows.Err()
}

// Fork creates branch name at the commit from resolves to: one record, no
// copies.
func (s *Store) Fork(name, from string) (Branch, error) {
	r, err := s.Resolve(from)
	if err != nil {
		return Branch{}, fmt.Errorf("fork %s: %w", name, err)
	}
	err = s.Update(func(tx *RefTx) error { return tx.CreateBranch(name, r.Commit, from) })
	if err != nil {
		return Branch{}, fmt.Errorf("fork %s from %s: %w", name, from, err)
	}
	return s.Branch(name)
}

// DeleteBranch removes a branch; its commits stay. A branch Workspaces
// are leased on is refused (ErrInUse, naming them), since their next
// commit would find no branch, unless force is set.
func (s *Store) DeleteBranch(name string, force bool) error {
	return s.Update(func(tx *RefTx) error { return tx.DeleteBranch(name, force) })
}

// RefKind says what a ref named.
type RefKind int

const (
	RefBranch RefKind = iota + 1
	RefCommit
	RefLayer
)

// Resolved is what a ref names: always a Commit, and how it got there.
type Resolved struct {
	Commit object.ID
	Kind   RefKind
	Branch string   // for RefBranch
	Layer  LayerRef // for RefLayer
}

// Resolve reads a ref: a branch name, a layer (L<seq> or a layer id or
// prefix), a commit id or unique prefix of at least 4 hex digits, each
// optionally followed by ~N (the Nth first-parent ancestor).
func (s *Store) Resolve(ref string) (Resolved, error) {
	base, back, err := splitAncestry(ref)
	if err != nil {
		return Resolved{}, err
	}
	r, err := s.resolveBase(base)
	if err != nil {
		return r, err
	}
	for i := 0; i < back; i++ {
		c, err := s.Commit(r.Commit)
		if err != nil {
			return r, fmt.Errorf("ref %q: %w", ref, err)
		}
		if len(c.Parents) == 0 {
			return r, fmt.Errorf("ref %q: history has only %d commits before it: %w", ref, i, ErrNotFound)
		}
		r = Resolved{Commit: c.Parents[0], Kind: RefCommit}
	}
	return r, nil
}

// splitAncestry splits REF~N~M... (a bare ~ is ~1) into REF and N+M+...
func splitAncestry(ref string) (string, int, error) {
	base, rest, found := strings.Cut(ref, "~")
	if !found {
		return ref, 0, nil
	}
	total := 0
	for _, n := range strings.Split(rest, "~") {
		back, err := strconv.Atoi(n)
		if n == "" {
			back, err = 1, nil
		}
		if err != nil || back < 0 || n != "" && n[0] == '+' || total+back > 1<<30 {
			return "", 0, fmt.Errorf("ref %q: bad ~N suffix: %w", ref, ErrBadName)
		}
		total += back
	}
	return base, total, nil
}

func (s *Store) resolveBase(ref string) (Resolved, error) {
	if ref == "" {
		return Resolved{}, fmt.Errorf("empty ref: %w", ErrBadName)
	}
	b, err := s.Branch(ref)
	if err == nil {
		return Resolved{Commit: b.Head, Kind: RefBranch, Branch: ref}, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return Resolved{}, err
	}
	if layerName.MatchString(ref) {
		return s.resolveLayerSeq(ref)
	}
	return s.resolvePrefix(ref)
}

func (s *Store) resolveLayerSeq(ref string) (Resolved, error) {
	seq, err := strconv.ParseInt(ref[1:], 10, 64)
	if err != nil {
		return Resolved{}, fmt.Errorf("ref %q: %w", ref, ErrBadName)
	}
	l, err := s.layerBySeq(seq)
	if err != nil {
		return Resolved{}, fmt.Errorf("layer %s: %w", ref, err)
	}
	return Resolved{Commit: l.Commit, Kind: RefLayer, Layer: l}, nil
}

func (s *Store) layerBySeq(seq int64) (LayerRef, error) {
	l := LayerRef{Seq: seq}
	var id, commit []byte
	var created int64
	err := s.stmts.layerSeq.QueryRow(seq).Scan(&id, &commit, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return l, ErrNotFound
	}
	if err != nil {
		return l, err
	}
	l.ID, _ = object.FromBytes(id)
	l.Commit, _ = object.FromBytes(commit)
	l.Created = time.Unix(0, created)
	return l, nil
}

var hexRef = regexp.MustCompile(`^[0-9a-fA-F]{4,64}$`)

func (s *Store) resolvePrefix(ref string) (Resolved, error) {
	if !hexRef.MatchString(ref) {
		return Resolved{}, fmt.Errorf("unknown ref %q (not a branch, layer or commit id): %w", ref, ErrNotFound)
	}
	matches, err := s.findPrefix(context.Background(), strings.ToLower(ref))
	if err != nil {
		return Resolved{}, fmt.Errorf("resolve %q: %w", ref, err)
	}
	switch len(matches) {
	case 0:
		return Resolved{}, fmt.Errorf("unknown ref %q: no branch, layer or commit matches: %w", ref, ErrNotFound)
	case 1:
	default:
		var names []string
		for _, m := range matches {
			names = append(names, m.kind.String()+" "+m.id.Short())
		}
		return Resolved{}, fmt.Errorf("ref %q matches %s; give more digits: %w", ref, strings.Join(names, ", "), ErrAmbiguous)
	}
	m := matches[0]
	if m.kind == object.KindCommit {
		return Resolved{Commit: m.id, Kind: RefCommit}, nil
	}
	l, err := s.Layer(m.id)
	if err != nil {
		return Resolved{}, err
	}
	lr, err := s.layerBySeq(l.Seq)
	if err != nil {
		lr = LayerRef{Seq: l.Seq, ID: m.id, Commit: l.Commit}
	}
	return Resolved{Commit: l.Commit, Kind: RefLayer, Layer: lr}, nil
}

type prefixMatch struct {
	id   object.ID
	kind object.Kind
}

// findPrefix returns up to three commits or layers whose id starts with the
// hex prefix p.
func (s *Store) findPrefix(ctx context.Context, p string) ([]prefixMatch, error) {
	lo, _ := hex.DecodeString(p + strings.Repeat("0", 64-len(p)))
	hi, _ := hex.DecodeString(p + strings.Repeat("f", 64-len(p)))
	rows, err := s.r.QueryContext(ctx, `SELECT id, kind FROM objects WHERE id BETWEEN ? AND ? AND kind IN (?, ?) LIMIT 3`,
		lo, hi, object.KindCommit, object.KindLayer)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []prefixMatch
	for rows.Next() {
		var m prefixMatch
		var id []byte
		if err := rows.Scan(&id, &m.kind); err != nil {
			return nil, err
		}
		m.id, _ = object.FromBytes(id)
		out = append(out, m)
	}
	return out, rows.Err()
}

func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

// InitTree returns the tree of main's first Layer — what init captured —
// or zero when there is none yet. That Layer never changes, so the answer
// is kept once found.
func (s *Store) InitTree() (object.ID, error) {
	if id, ok := s.initTree.Load().(object.ID); ok {
		return id, nil
	}
	l, err := s.layerBySeq(1)
	if errors.Is(err, ErrNotFound) {
		return object.Zero, nil
	}
	if err != nil {
		return object.Zero, err
	}
	c, err := s.Commit(l.Commit)
	if err != nil {
		return object.Zero, err
	}
	s.initTree.Store(c.Tree)
	return c.Tree, nil
}
