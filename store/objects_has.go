package store

import (
	"fmt"
	"strings"

	"github.com/layerfs/layerfs/object"
)

// HasManyMax is the most IDs HasMany looks up in one query.
const HasManyMax = 16

// hasManyQuery finds which of HasManyMax IDs are stored; a shorter list
// repeats one.
var hasManyQuery = `SELECT id FROM objects WHERE id IN (?` + strings.Repeat(`, ?`, HasManyMax-1) + `)`

// HasMany reports which of ids are stored, in their order: one query per
// HasManyMax of them, where Has costs one each. A capture of a big new
// file asks about 2,000 chunks.
func (s *Store) HasMany(ids []object.ID) ([]bool, error) {
	out := make([]bool, len(ids))
	for start := 0; start < len(ids); start += HasManyMax {
		part := ids[start:min(len(ids), start+HasManyMax)]
		found, err := s.hasPart(part)
		if err != nil {
			return nil, err
		}
		for i, id := range part {
			out[start+i] = found[id]
		}
	}
	return out, nil
}

func (s *Store) hasPart(ids []object.ID) (map[object.ID]bool, error) {
	rows, err := s.stmts.hasMany.Query(idArgs(nil, ids, HasManyMax)...)
	if err != nil {
		return nil, fmt.Errorf("look up %d objects: %w", len(ids), err)
	}
	defer rows.Close()
	found := make(map[object.ID]bool, len(ids))
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			return nil, err
		}
		if id, err := object.FromBytes(raw); err == nil {
			found[id] = true
		}
	}
	return found, rows.Err()
}
