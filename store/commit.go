package store

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/layerfs/layerfs/object"
)

// Commit is a snapshot: a root tree, the commits it follows, and who made it.
type Commit struct {
	Tree    object.ID
	Parents []object.ID
	// Origin names who made the Commit: "operation:<id>" for a file call,
	// "workspace_session:<id>" for a Workspace commit, "init" for init.
	Origin  string
	Message string
	Time    int64 // ns since the Unix epoch
}

// Origin prefixes.
const (
	OriginOperation = "operation:"
	OriginSession   = "workspace_session:"
	OriginInit      = "init"
)

// When returns the commit time.
func (c *Commit) When() time.Time { return time.Unix(0, c.Time) }

// Encode returns the commit's canonical bytes.
func (c *Commit) Encode() []byte {
	e := object.Encoder{}
	e.ID(c.Tree)
	e.Uvarint(uint64(len(c.Parents)))
	for _, p := range c.Parents {
		e.ID(p)
	}
	e.String(c.Origin)
	e.String(c.Message)
	e.Varint(c.Time)
	return e.B
}

// DecodeCommit parses a commit's canonical bytes.
func DecodeCommit(b []byte) (*Commit, error) {
	d := object.Decoder{B: b}
	c := &Commit{Tree: d.ID()}
	n := d.Uvarint()
	if n > uint64(len(b))/object.Size {
		return nil, fmt.Errorf("commit: %d parents: %w", n, ErrCorrupt)
	}
	for i := uint64(0); i < n; i++ {
		c.Parents = append(c.Parents, d.ID())
	}
	c.Origin = d.String()
	c.Message = d.String()
	c.Time = d.Varint()
	if err := d.Done(); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	return c, nil
}

// CheckOrigin reports whether an origin is one LayerFS writes: a known
// prefix and an id of printable text (log, blame and layers print it in a
// line of their own).
func CheckOrigin(o string) error {
	if !utf8.ValidString(o) || strings.IndexFunc(o, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 || len(o) > 200 {
		return fmt.Errorf("origin %q: want printable text (no tabs, newlines or other control characters), at most 200 bytes: %w", o, ErrBadName)
	}
	for _, p := range []string{OriginOperation, OriginSession} {
		if strings.HasPrefix(o, p) && len(o) > len(p) {
			return nil
		}
	}
	if o == OriginInit {
		return nil
	}
	return fmt.Errorf("origin %q: want operation:<id> or workspace_session:<id>: %w", o, ErrBadName)
}

// PutCommit stores a commit and returns its ID.
func (b *Batch) PutCommit(c *Commit) (object.ID, error) {
	return b.Put(object.KindCommit, c.Encode())
}

// Commit reads and decodes a commit. Commits are cached and shared: the
// caller must not modify the result.
func (s *Store) Commit(id object.ID) (*Commit, error) {
	if c, ok := s.commits.get(id); ok {
		return c, nil
	}
	data, err := s.Get(id, object.KindCommit)
	if err != nil {
		return nil, err
	}
	c, err := DecodeCommit(data)
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", id.Short(), err)
	}
	s.commits.add(id, c)
	return c, nil
}

// Layer is one published version on main: a Commit and the commit its
// changeset is taken against (the previous Layer's, or zero for the first).
type Layer struct {
	Seq    int64
	Commit object.ID
	Base   object.ID
	// From, for a squashed layer, is the first of the run of layers it
	// folds (through Seq); zero otherwise.
	From int64
}

// Encode returns the layer's canonical bytes. From is written only for a
// squashed layer, so plain layers keep their original encoding.
func (l *Layer) Encode() []byte {
	e := object.Encoder{}
	e.Uvarint(uint64(l.Seq))
	e.ID(l.Commit)
	e.ID(l.Base)
	if l.From != 0 {
		e.Uvarint(uint64(l.From))
	}
	return e.B
}

// DecodeLayer parses a layer's canonical bytes.
func DecodeLayer(b []byte) (*Layer, error) {
	d := object.Decoder{B: b}
	l := &Layer{Seq: int64(d.Uvarint()), Commit: d.ID(), Base: d.ID()}
	if len(d.B) > 0 {
		l.From = int64(d.Uvarint())
		if l.From == 0 || l.From >= l.Seq {
			return nil, fmt.Errorf("layer: squash range %d..%d: %w", l.From, l.Seq, ErrCorrupt)
		}
	}
	if err := d.Done(); err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return l, nil
}

// Layer reads and decodes a layer object.
func (s *Store) Layer(id object.ID) (*Layer, error) {
	data, err := s.Get(id, object.KindLayer)
	if err != nil {
		return nil, err
	}
	l, err := DecodeLayer(data)
	if err != nil {
		return nil, fmt.Errorf("layer %s: %w", id.Short(), err)
	}
	return l, nil
}

// Name is the short form people type: L followed by the sequence number.
func (l *Layer) Name() string { return fmt.Sprintf("L%06d", l.Seq) }
