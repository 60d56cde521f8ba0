package store

import (
	"context"
	"math/rand"
	"testing"

	sqlite "modernc.org/sqlite"
)

// TestWriterCacheAfterLargeWrite: a large write keeps its pages in memory
// until it commits (no spill), and the writer's page cache is back near
// its size afterwards, so later small commits do not walk them.
func TestWriterCacheAfterLargeWrite(t *testing.T) {
	s := NewTestStore(t)
	status := func(op sqlite.DBStatusOp) int {
		c, err := s.w.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var cur int
		if err := c.Raw(func(dc any) error {
			cur, _, err = dc.(interface {
				Status(sqlite.DBStatusOp, bool) (int, int, error)
			}).Status(op, false)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return cur
	}
	rng := rand.New(rand.NewSource(1))
	chunks := make([][]byte, (3*packTarget/2)/(16<<10))
	for i := range chunks {
		chunks[i] = make([]byte, 16<<10)
		rng.Read(chunks[i])
	}
	st := s.NewStage()
	if _, err := st.PutChunks(chunks); err != nil {
		t.Fatal(err)
	}
	if err := st.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := status(sqlite.DBStatusCacheSpill); n != 0 {
		t.Errorf("%d pages spilled to the WAL mid-transaction", n)
	}
	if n := status(sqlite.DBStatusCacheUsed); n > 2*writerCacheBytes {
		t.Errorf("writer's page cache holds %d bytes after the write, want about %d", n, writerCacheBytes)
	}
}
