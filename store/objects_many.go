package store

import (
	"fmt"
	"strings"

	"github.com/layerfs/layerfs/object"
)

// GetManyMax is the most objects GetMany reads in one query.
const GetManyMax = 16

// manyQuery reads GetManyMax objects; a shorter run repeats an id.
var manyQuery = `SELECT id, kind, size, enc, base, data FROM objects WHERE id IN (?` +
	strings.Repeat(`, ?`, GetManyMax-1) + `)`

// GetMany reads several objects of kind k in one query — one statement and
// one read transaction instead of one each, which is most of what reading
// a small object costs — for readers that know ahead which objects they
// need (the chunks of a sequential read). fn is called once per id, in no
// particular order, with its verified bytes or the error Get would return.
// At most GetManyMax ids are read per query; more are split.
func (s *Store) GetMany(ids []object.ID, k object.Kind, fn func(id object.ID, data []byte, err error)) error {
	ids = distinct(ids)
	for len(ids) > 0 {
		n := min(len(ids), GetManyMax)
		if err := s.getMany(ids[:n], k, fn); err != nil {
			return err
		}
		ids = ids[n:]
	}
	return nil
}

// distinct returns ids without repeats, in their first order.
func distinct(ids []object.ID) []object.ID {
	seen := make(map[object.ID]bool, len(ids))
	out := ids[:0:0]
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

func (s *Store) getMany(ids []object.ID, k object.Kind, fn func(id object.ID, data []byte, err error)) error {
	args := make([]any, GetManyMax)
	for i := range args {
		args[i] = ids[min(i, len(ids)-1)][:]
	}
	rows, err := s.stmts.many.Query(args...)
	if err != nil {
		return fmt.Errorf("read %d objects: %w", len(ids), err)
	}
	pending := map[object.ID]bool{}
	for _, id := range ids {
		pending[id] = true
	}
	var later []object.ID // delta-encoded: read after the rows are released
	for rows.Next() {
		var idb []byte
		var o storedObject
		if err := rows.Scan(&idb, &o.kind, &o.size, &o.enc, &o.base, &o.data); err != nil {
			rows.Close()
			return fmt.Errorf("read %d objects: %w", len(ids), err)
		}
		id, _ := object.FromBytes(idb)
		if !pending[id] {
			continue
		}
		delete(pending, id)
		if o.enc == encDelta {
			later = append(later, id)
			continue
		}
		data, err := s.decodeRow(id, &o, k)
		fn(id, data, err)
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return fmt.Errorf("read %d objects: %w", len(ids), err)
	}
	for _, id := range later {
		data, err := s.Get(id, k)
		fn(id, data, err)
	}
	for id := range pending {
		fn(id, nil, fmt.Errorf("object %s: %w", id.Short(), ErrNotFound))
	}
	return nil
}

// decodeRow decodes and verifies a row that is not a delta.
func (s *Store) decodeRow(id object.ID, o *storedObject, k object.Kind) ([]byte, error) {
	if o.kind != k {
		return nil, wrongKind(id, o.kind, k)
	}
	var raw []byte
	if o.enc == encRaw {
		raw = o.data // the driver's own copy: see rowsAreFresh in objects.go
	} else {
		var err error
		if raw, err = s.codec.decode(o.enc, o.data, nil, o.size); err != nil {
			return nil, fmt.Errorf("object %s: decode: %v: %w", id.Short(), err, ErrCorrupt)
		}
	}
	if object.Sum(k, raw) != id {
		return nil, fmt.Errorf("object %s: stored bytes do not hash to its id: %w", id.Short(), ErrCorrupt)
	}
	return raw, nil
}
