package store

import (
	"database/sql"
	"fmt"
	"strings"

	"github.com/layerfs/layerfs/object"
)

// GetManyMax is the most objects GetMany reads in one query; more are
// split.
const GetManyMax = 64

// manyPointMax is the most objects one lookup by ID (manyQuery) reads.
const manyPointMax = 16

// Objects stored together, as the chunks of one file are, sit next to each
// other in the table (seq order). runQuery reads such a run in one pass
// over the table's b-tree, from the first object asked for to the last,
// keeping those asked for, where manyQuery costs an index search and a
// table search per object: it about halves what reading a chunk costs.
// The stretch read may be at most runSlack times as long as the list;
// what it does not hold is looked up by ID.
const runSlack = 4

// runQuery reads those of GetManyMax IDs whose seq is in a range. NOT
// INDEXED keeps SQLite on the rowid range rather than the ID index.
var runQuery = `SELECT id, kind, size, enc, base, data FROM objects NOT INDEXED
WHERE seq BETWEEN ? AND ? AND id IN (?` + strings.Repeat(`, ?`, GetManyMax-1) + `)`

// manyQuery reads manyPointMax objects by ID; a shorter list repeats one.
var manyQuery = `SELECT id, kind, size, enc, base, data FROM objects WHERE id IN (?` +
	strings.Repeat(`, ?`, manyPointMax-1) + `)`

// GetMany reads several objects of kind k in few queries — one statement
// and one read transaction instead of one each, which is most of what
// reading a small object costs — for readers that know ahead which
// objects they need (the chunks of a sequential read). fn is called once
// per id, in no particular order, with its verified bytes or the error Get
// would return.
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

// getMany reads up to GetManyMax distinct objects: the run they were
// stored in, if they were, then the rest by ID.
func (s *Store) getMany(ids []object.ID, k object.Kind, fn func(id object.ID, data []byte, err error)) error {
	rest := ids
	if lo, hi, ok := s.seqSpan(ids); ok {
		args := make([]any, 2, 2+GetManyMax)
		args[0], args[1] = lo, hi
		var err error
		if rest, err = s.readRows(s.stmts.run, idArgs(args, ids, GetManyMax), ids, k, fn); err != nil {
			return err
		}
	}
	for len(rest) > 0 {
		n := min(len(rest), manyPointMax)
		missing, err := s.readRows(s.stmts.many, idArgs(nil, rest[:n], manyPointMax), rest[:n], k, fn)
		if err != nil {
			return err
		}
		for _, id := range missing {
			fn(id, nil, fmt.Errorf("object %s: %w", id.Short(), ErrNotFound))
		}
		rest = rest[n:]
	}
	return nil
}

// seqSpan returns the seqs of the first and the last of ids, in order,
// when the stretch between them is short enough for runQuery.
func (s *Store) seqSpan(ids []object.ID) (lo, hi int64, ok bool) {
	if len(ids) < 2 {
		return 0, 0, false
	}
	if s.stmts.seq.QueryRow(ids[0][:]).Scan(&lo) != nil ||
		s.stmts.seq.QueryRow(ids[len(ids)-1][:]).Scan(&hi) != nil {
		return 0, 0, false
	}
	lo, hi = min(lo, hi), max(lo, hi)
	return lo, hi, hi-lo < runSlack*int64(len(ids))
}

// idArgs appends ids to args as query arguments, n of them: a shorter
// list repeats its last ID.
func idArgs(args []any, ids []object.ID, n int) []any {
	for i := 0; i < n; i++ {
		args = append(args, ids[min(i, len(ids)-1)][:])
	}
	return args
}

// readRows runs a query for the objects ids, calls fn for each row that
// is one of them, and returns those it did not find, in their order.
// Delta-encoded objects are read after the rows are released.
func (s *Store) readRows(st *sql.Stmt, args []any, ids []object.ID, k object.Kind, fn func(id object.ID, data []byte, err error)) ([]object.ID, error) {
	rows, err := st.Query(args...)
	if err != nil {
		return nil, fmt.Errorf("read %d objects: %w", len(ids), err)
	}
	pending := make(map[object.ID]bool, len(ids))
	for _, id := range ids {
		pending[id] = true
	}
	var later []object.ID
	for rows.Next() {
		var idb []byte
		var o storedObject
		if err := rows.Scan(&idb, &o.kind, &o.size, &o.enc, &o.base, &o.data); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read %d objects: %w", len(ids), err)
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
		return nil, fmt.Errorf("read %d objects: %w", len(ids), err)
	}
	for _, id := range later {
		data, err := s.Get(id, k)
		fn(id, data, err)
	}
	var missing []object.ID
	for _, id := range ids {
		if pending[id] {
			missing = append(missing, id)
		}
	}
	return missing, nil
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
