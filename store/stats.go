package store

import (
	"fmt"
	"os"

	"github.com/layerfs/layerfs/object"
)

// Stats measures a Store.
type Stats struct {
	// LogicalBytes: file bytes in the trees of every branch head and every
	// layer, counted once per head and per layer — what a copy per branch
	// and per published version would cost.
	LogicalBytes int64 `json:"logical_bytes"`
	// CanonicalBytes: the distinct objects' uncompressed bytes.
	CanonicalBytes int64 `json:"canonical_bytes"`
	// StoredBytes: the objects' bytes as stored (compressed or delta).
	StoredBytes int64 `json:"stored_bytes"`
	// FileBytes: the Store file and its WAL on disk, SQLite pages and
	// indexes included.
	FileBytes int64 `json:"file_bytes"`
	Objects   int64 `json:"objects"`
	Packs     int64 `json:"packs"`
	Branches  int   `json:"branches"`
	Layers    int   `json:"layers"`
	// Dedupe = logical ÷ canonical; Compression = canonical ÷ stored.
	Dedupe      float64 `json:"dedupe"`
	Compression float64 `json:"compression"`
}

// Stats counts what the Store holds. Its cost follows the number of distinct
// trees, not the number of heads: each tree's byte total is computed once.
func (s *Store) Stats() (Stats, error) {
	var st Stats
	err := s.r.QueryRow(`SELECT count(*), coalesce(sum(objects), 0), coalesce(sum(raw_bytes), 0), coalesce(sum(stored_bytes), 0) FROM packs`).
		Scan(&st.Packs, &st.Objects, &st.CanonicalBytes, &st.StoredBytes)
	if err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	heads, err := s.rootCommits()
	if err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	st.Branches, st.Layers = heads.branches, heads.layers
	sizes := map[object.ID]int64{}
	for _, c := range heads.commits {
		n, err := s.commitBytes(c, sizes)
		if err != nil {
			return st, fmt.Errorf("stats: %w", err)
		}
		st.LogicalBytes += n
	}
	for _, f := range []string{s.path, s.path + "-wal"} {
		if fi, err := os.Stat(f); err == nil {
			st.FileBytes += fi.Size()
		}
	}
	if st.CanonicalBytes > 0 {
		st.Dedupe = float64(st.LogicalBytes) / float64(st.CanonicalBytes)
	}
	if st.StoredBytes > 0 {
		st.Compression = float64(st.CanonicalBytes) / float64(st.StoredBytes)
	}
	return st, nil
}

type rootSet struct {
	commits          []object.ID // one per branch head and per layer, repeats kept
	branches, layers int
}

// rootCommits lists the commits every branch head and layer names.
func (s *Store) rootCommits() (rootSet, error) {
	var rs rootSet
	bs, err := s.Branches()
	if err != nil {
		return rs, err
	}
	for _, b := range bs {
		rs.commits = append(rs.commits, b.Head)
	}
	ls, err := s.Layers()
	if err != nil {
		return rs, err
	}
	for _, l := range ls {
		rs.commits = append(rs.commits, l.Commit)
	}
	rs.branches, rs.layers = len(bs), len(ls)
	return rs, nil
}

func (s *Store) commitBytes(id object.ID, memo map[object.ID]int64) (int64, error) {
	c, err := s.Commit(id)
	if err != nil {
		return 0, err
	}
	return s.TreeBytes(c.Tree, memo)
}

// TreeBytes sums the file sizes below a tree. memo, when not nil, caches
// totals by tree ID across calls.
func (s *Store) TreeBytes(id object.ID, memo map[object.ID]int64) (int64, error) {
	if n, ok := memo[id]; ok {
		return n, nil
	}
	t, err := s.Tree(id)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, e := range t.Entries {
		switch e.Type {
		case TypeFile:
			n += e.Size
		case TypeDir:
			sub, err := s.TreeBytes(e.ID, memo)
			if err != nil {
				return 0, err
			}
			n += sub
		}
	}
	if memo != nil {
		memo[id] = n
	}
	return n, nil
}
