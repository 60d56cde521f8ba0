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
// When the stretch between the first and the last is over runSlack times
// as long as the list (the subtrees of a directory, say), runQuery reads
// nothing; what it does not read is then looked up by ID.
const runSlack = 4

// runQuery reads those of GetManyMax IDs (?1 to ?64, the first and the
// last asked for at either end) whose seq lies between the first's and
// the last's, if those are fewer than ?65 rows apart. NOT INDEXED keeps
// SQLite on the rowid range rather than the ID index; the bounds are
// constant subqueries, run once.
var runQuery = fmt.Sprintf(`SELECT id, kind, size, enc, base, data FROM objects NOT INDEXED
WHERE seq BETWEEN (SELECT min(seq) FROM objects WHERE id IN (?1, ?%[1]d))
	AND (SELECT CASE WHEN max(seq) - min(seq) < ?%[2]d THEN max(seq) ELSE 0 END FROM objects WHERE id IN (?1, ?%[1]d))
	AND id IN (%[3]s)`, GetManyMax, GetManyMax+1, numbered(1, GetManyMax))

// numbered lists the numbered parameters ?from to ?to.
func numbered(from, to int) string {
	ps := make([]string, 0, to-from+1)
	for i := from; i <= to; i++ {
		ps = append(ps, fmt.Sprintf("?%d", i))
	}
	return strings.Join(ps, ", ")
}

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
	if len(ids) > 1 {
		args := idArgs(make([]any, 0, GetManyMax+1), ids, GetManyMax)
		var err error
		if rest, err = s.readRows(s.stmts.run, append(args, runSlack*len(ids)), ids, k, fn); err != nil {
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
			err := error(ErrMissingObject)
			if s.changedSinceOpen() {
				err = ErrStoreChanged
			}
			fn(id, nil, fmt.Errorf("object %s: %w", id.Short(), err))
		}
		rest = rest[n:]
	}
	return nil
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
