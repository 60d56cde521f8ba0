package publish

import (
	"bytes"
	"errors"
	"math/rand"
	"testing"

	"github.com/layerfs/layerfs/extents"
	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// TestReadAllInOnePass: a big file read in one pass through the Store's
// raw readers is the file, repeated chunks included; a chunk of another
// length than its extent, or a chunk that cannot be read, is an error.
func TestReadAllInOnePass(t *testing.T) {
	s := store.NewTestStore(t)
	st := s.NewStage()
	block := make([]byte, 300<<10)
	rand.New(rand.NewSource(7)).Read(block)
	data := bytes.Join([][]byte{block, block, []byte("tail"), block}, nil) // repeats: shared chunks
	f, err := extents.WriteBytes(st, data)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Flush(); err != nil {
		t.Fatal(err)
	}
	if int64(len(data)) < readManyMin || f.Kind() == 0 {
		t.Fatalf("fixture: %d bytes, kind %v", len(data), f.Kind())
	}
	e := &store.Entry{Type: store.TypeFile, ID: f.ID, Size: f.Size}
	got, err := readAll(s.WriterReads(), e)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("read in one pass: other bytes than were written")
	}
	// Through a getter that reads chunk by chunk: the same bytes.
	slow, err := readAll(stages{st}, e)
	if err != nil || !bytes.Equal(slow, data) {
		t.Fatalf("read chunk by chunk: %v", err)
	}
	short := badMany{stages{st}, func(id object.ID, data []byte) ([]byte, error) { return data[:len(data)-1], nil }}
	if _, err := readAll(short, e); !errors.Is(err, object.ErrCorrupt) {
		t.Errorf("a chunk one byte short: %v, want ErrCorrupt", err)
	}
	failing := badMany{stages{st}, func(id object.ID, data []byte) ([]byte, error) { return nil, store.ErrNotFound }}
	if _, err := readAll(failing, e); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a chunk that cannot be read: %v, want ErrNotFound", err)
	}
}

// badMany reads chunks in one pass through its getter and passes each
// through mangle.
type badMany struct {
	stages
	mangle func(id object.ID, data []byte) ([]byte, error)
}

func (b badMany) GetManyInto(ids []object.ID, k object.Kind, alloc func(n int) []byte, fn func(id object.ID, data []byte, err error)) error {
	for _, id := range ids {
		data, err := b.Get(id, k)
		if err == nil {
			data, err = b.mangle(id, data)
		}
		fn(id, data, err)
	}
	return nil
}
