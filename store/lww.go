package store

import (
	"fmt"

	"github.com/layerfs/layerfs/object"
)

// LWW winners.
const (
	LWWOurs = "ours"
	LWWHead = "head"
)

// LWWDecision records how a .lww rule settled a path both sides changed:
// the side with the newer mtime won (ours on a tie).
type LWWDecision struct {
	Path      string `json:"path"`
	Winner    string `json:"winner"`
	OursMTime int64  `json:"ours_mtime"`
	HeadMTime int64  `json:"head_mtime"`
}

// RecordLWW keeps a Commit's .lww decisions, in the transaction that
// lands it.
func (t *RefTx) RecordLWW(commit object.ID, ds []LWWDecision) error {
	for _, d := range ds {
		_, err := t.tx.ExecContext(t.ctx, `INSERT INTO lww(commit_id, path, winner, ours_mtime, head_mtime) VALUES(?, ?, ?, ?, ?)
			ON CONFLICT DO NOTHING`, commit[:], d.Path, d.Winner, d.OursMTime, d.HeadMTime)
		if err != nil {
			return fmt.Errorf("record lww decision for %s: %w", d.Path, err)
		}
	}
	return nil
}

// LWW returns the .lww decisions a Commit was made with.
func (s *Store) LWW(commit object.ID) ([]LWWDecision, error) {
	rows, err := s.r.Query(`SELECT path, winner, ours_mtime, head_mtime FROM lww WHERE commit_id = ? ORDER BY path`, commit[:])
	if err != nil {
		return nil, fmt.Errorf("lww decisions of %s: %w", commit.Short(), err)
	}
	defer rows.Close()
	var out []LWWDecision
	for rows.Next() {
		var d LWWDecision
		if err := rows.Scan(&d.Path, &d.Winner, &d.OursMTime, &d.HeadMTime); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}
