package store

import (
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/layerfs/layerfs/object"
)

// ErrSquash: a squash range that is not a run of visible layers.
var ErrSquash = errors.New("bad squash range")

// Squash folds the run of visible layers from..to (sequence numbers) into
// one layer with the same final tree: it shows as layer to, whose changeset
// is taken against the layer before from. Nothing is deleted: the folded
// layers stay resolvable by L<n> and their Commits stay where they were,
// so forks and Workspaces leased on them keep working.
func (s *Store) Squash(from, to int64) (LayerRef, error) {
	var out LayerRef
	err := s.Update(func(tx *RefTx) error {
		l, err := tx.squash(from, to)
		out = l
		return err
	})
	if err != nil {
		return out, fmt.Errorf("squash L%d..L%d: %w", from, to, err)
	}
	return out, nil
}

func (t *RefTx) squash(from, to int64) (LayerRef, error) {
	if from >= to || from < 1 {
		return LayerRef{}, fmt.Errorf("%w: want FROM < TO, both at least 1", ErrSquash)
	}
	var visible int64
	err := t.tx.QueryRowContext(t.ctx, `SELECT count(*) FROM manifest WHERE seq IN (?, ?) AND squashed_into IS NULL`, from, to).Scan(&visible)
	if err != nil {
		return LayerRef{}, err
	}
	if visible != 2 {
		return LayerRef{}, fmt.Errorf("%w: L%d and L%d must both be visible layers (see layerfs layers)", ErrSquash, from, to)
	}
	first, last := t.layerAt(from), t.layerAt(to)
	if err := errors.Join(first.err, last.err); err != nil {
		return LayerRef{}, err
	}
	l := &Layer{Seq: to, Commit: last.layer.Commit, Base: first.layer.Base, From: from}
	id := t.Put(object.KindLayer, l.Encode())
	if _, err = t.tx.ExecContext(t.ctx, `UPDATE manifest SET squashed_into = ? WHERE seq >= ? AND seq < ? AND squashed_into IS NULL`, to, from, to); err != nil {
		return LayerRef{}, err
	}
	if _, err = t.tx.ExecContext(t.ctx, `UPDATE manifest SET layer = ? WHERE seq = ?`, id[:], to); err != nil {
		return LayerRef{}, err
	}
	var created int64
	if err := t.tx.QueryRowContext(t.ctx, `SELECT created FROM manifest WHERE seq = ?`, to).Scan(&created); err != nil {
		return LayerRef{}, err
	}
	return LayerRef{Seq: to, ID: id, Commit: l.Commit, Created: time.Unix(0, created)}, nil
}

type layerRow struct {
	layer *Layer
	err   error
}

// layerAt reads the layer object a manifest row names, inside the
// transaction (it may have been written by an earlier squash in it).
func (t *RefTx) layerAt(seq int64) layerRow {
	var id []byte
	err := t.tx.QueryRowContext(t.ctx, `SELECT layer FROM manifest WHERE seq = ?`, seq).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return layerRow{err: fmt.Errorf("L%d: %w", seq, ErrNotFound)}
	}
	if err != nil {
		return layerRow{err: err}
	}
	lid, _ := object.FromBytes(id)
	l, err := t.s.Layer(lid)
	return layerRow{layer: l, err: err}
}

// AllLayers lists every manifest row, squashed or not, oldest first: fsck
// walks them all.
func (s *Store) AllLayers() ([]LayerRef, error) {
	rows, err := s.r.Query(`SELECT seq, layer, commit_id, created FROM manifest ORDER BY seq`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []LayerRef
	for rows.Next() {
		var l LayerRef
		var id, commit []byte
		if err := rows.Scan(&l.Seq, &id, &commit, new(int64)); err != nil {
			return nil, err
		}
		l.ID, _ = object.FromBytes(id)
		l.Commit, _ = object.FromBytes(commit)
		out = append(out, l)
	}
	return out, rows.Err()
}
