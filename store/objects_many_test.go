package store

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/layerfs/layerfs/object"
)

func TestGetManyReadsLikeGet(t *testing.T) {
	s := NewTestStore(t)
	want := map[object.ID][]byte{}
	b := s.NewBatch()
	var ids []object.ID
	for i := 0; i < GetManyMax+10; i++ { // more than one query's worth
		data := randBytes(int64(i), 100+i*50)
		if i%3 == 0 {
			data = bytes.Repeat([]byte{byte(i)}, 5000) // compressed
		}
		id, err := b.Put(object.KindChunk, data)
		if err != nil {
			t.Fatal(err)
		}
		want[id] = data
		ids = append(ids, id)
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	v2 := append([]byte(nil), want[ids[1]]...)
	copy(v2[10:], "edit")
	delta := putDelta(t, s, v2, ids[1])
	want[delta] = v2
	missing := object.Sum(object.KindChunk, []byte("never stored"))
	tree := putFlush(t, s, object.KindTree, []byte{0})

	ask := append(append([]object.ID{}, ids...), delta, missing, tree, ids[0]) // ids[0] twice
	for name, getMany := range manyReaders(t, s) {
		got := map[object.ID][]byte{}
		errs := map[object.ID]error{}
		calls := 0
		err := getMany(ask, object.KindChunk, func(id object.ID, data []byte, err error) {
			calls++
			got[id], errs[id] = data, err
		})
		if err != nil {
			t.Fatal(err)
		}
		if calls != len(ask)-1 {
			t.Errorf("%s: %d calls for %d distinct ids", name, calls, len(ask)-1)
		}
		for id, data := range want {
			if errs[id] != nil || !bytes.Equal(got[id], data) {
				t.Errorf("%s: object %s: %v", name, id.Short(), errs[id])
			}
		}
		if !errors.Is(errs[missing], ErrNotFound) {
			t.Errorf("%s: missing object: %v", name, errs[missing])
		}
		if !errors.Is(errs[tree], ErrCorrupt) {
			t.Errorf("%s: object of another kind: %v", name, errs[tree])
		}
	}
}

type manyReader func(ids []object.ID, k object.Kind, fn func(id object.ID, data []byte, err error)) error

// manyReaders are GetMany and GetManyInto, the latter checking that what
// it hands over is in the buffers it asked for.
func manyReaders(t *testing.T, s *Store) map[string]manyReader {
	into := func(ids []object.ID, k object.Kind, fn func(id object.ID, data []byte, err error)) error {
		bufs := map[*byte]bool{}
		alloc := func(n int) []byte {
			b := make([]byte, n, n+7)
			bufs[&b[:1][0]] = true
			return b
		}
		return s.GetManyInto(ids, k, alloc, func(id object.ID, data []byte, err error) {
			if err == nil && (len(data) == 0 || !bufs[&data[0]]) {
				t.Errorf("GetManyInto: object %s is not in a buffer from alloc", id.Short())
			}
			fn(id, data, err)
		})
	}
	return map[string]manyReader{"GetMany": s.GetMany, "GetManyInto": into}
}

func putDelta(t *testing.T, s *Store, data []byte, base object.ID) object.ID {
	t.Helper()
	b := s.NewBatch()
	id, err := b.PutChunk(data, base)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	var enc int
	s.r.QueryRow(`SELECT enc FROM objects WHERE id = ?`, id[:]).Scan(&enc)
	if enc != encDelta {
		t.Fatalf("the edited chunk was stored with enc %d, not as a delta", enc)
	}
	return id
}

// TestGetManyRuns reads objects stored together, as runQuery does, in
// any order, with others stored between them and one asked for that is
// outside the run.
func TestGetManyRuns(t *testing.T) {
	s := NewTestStore(t)
	early := putFlush(t, s, object.KindChunk, []byte("stored long before"))
	want := map[object.ID][]byte{early: []byte("stored long before")}
	b := s.NewBatch()
	var run []object.ID
	for i := 0; i < 2*GetManyMax; i++ {
		data := randBytes(int64(1000+i), 20000)
		id, err := b.Put(object.KindChunk, data)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 { // every other one is asked for
			want[id] = data
			run = append(run, id)
		}
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	reversed := make([]object.ID, 0, len(run)+1)
	for i := len(run) - 1; i >= 0; i-- {
		reversed = append(reversed, run[i])
	}
	for name, getMany := range manyReaders(t, s) {
		for _, ask := range [][]object.ID{run, reversed, append(run[:GetManyMax/2:GetManyMax/2], early)} {
			n := 0
			err := getMany(ask, object.KindChunk, func(id object.ID, data []byte, err error) {
				n++
				if err != nil || !bytes.Equal(data, want[id]) {
					t.Errorf("%s: object %s: %v", name, id.Short(), err)
				}
			})
			if err != nil || n != len(ask) {
				t.Errorf("%s: %d of %d objects read: %v", name, n, len(ask), err)
			}
		}
	}
}

// TestRunQueryPlan guards what makes runQuery cheap: SQLite walks the
// rowid range, not the ID index.
func TestRunQueryPlan(t *testing.T) {
	s := NewTestStore(t)
	for _, q := range []struct {
		name, sql string
		args      int
	}{{"runQuery", runQuery, GetManyMax + 1}, {"rawRunQuery", rawRunQuery, 3}} {
		args := make([]any, q.args)
		for i := range args {
			args[i] = []byte{byte(i)}
		}
		rows, err := s.r.Query(`EXPLAIN QUERY PLAN `+q.sql, args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		if len(plan) == 0 || plan[0] != "SEARCH objects USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)" {
			t.Errorf("%s's plan:\n%s", q.name, strings.Join(plan, "\n"))
		}
	}
}

// TestInsertSomeStoredAlready: objects written in one transaction,
// some of them stored before: each is counted as new or reused rightly,
// and all read back.
func TestInsertSomeStoredAlready(t *testing.T) {
	s := NewTestStore(t)
	var data [][]byte
	for i := 0; i < 19; i++ {
		data = append(data, []byte(fmt.Sprintf("small object %d", i)))
	}
	first := s.NewStage()
	for _, d := range data[:5] {
		if _, err := first.Put(object.KindChunk, d); err != nil {
			t.Fatal(err)
		}
	}
	if err := first.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(func(tx *RefTx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	second := s.NewStage()
	var ids []object.ID
	for _, d := range data {
		id, err := second.Put(object.KindChunk, d)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := s.Update(func(tx *RefTx) error { tx.Write(second); return nil }); err != nil {
		t.Fatal(err)
	}
	if st := second.Stats(); st.New != len(data)-5 || st.Reused != 5 {
		t.Errorf("stats %+v: want %d new, 5 reused", st, len(data)-5)
	}
	for i, id := range ids {
		if got, err := s.Get(id, object.KindChunk); err != nil || string(got) != string(data[i]) {
			t.Errorf("object %d: %q %v", i, got, err)
		}
	}
}
