package extents

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/layerfs/layerfs/object"
)

// entrySplice says how an edit changes one level of a tree: the old entries
// over [start, oldEnd) give way to entries, which end at oldEnd plus the
// edit's delta. start and oldEnd are boundaries of that level's entries.
type entrySplice struct {
	start, oldEnd int64
	entries       []Entry
}

// rechunk cuts and stores the chunks an edit changes. It starts at the old
// chunk holding the edit's offset, since every old cut before it stays, and
// cuts the new content up to an old chunk boundary after the change: if the
// cut made there is a real one, the chunker restarts exactly as it did in
// the old file and every later chunk stays too. Otherwise it pulls the next
// old chunk and goes on from the last real cut.
func rechunk(s Store, r *Reader, src content) (entrySplice, error) {
	sp := src.sp
	old := &oldChunks{cur: newCursor(r, 0)}
	if err := old.pullRange(min(sp.off, r.f.Size-1), sp.off+sp.del); err != nil {
		return entrySplice{}, err
	}
	rc := rechunker{s: s, src: src, old: old}
	pos := old.start
	for {
		limit := old.end + sp.delta()
		var err error
		if pos, err = rc.cutWindow(pos, limit, old.end == r.f.Size); err != nil {
			return entrySplice{}, err
		}
		if pos == limit {
			return entrySplice{start: old.start, oldEnd: old.end, entries: rc.entries}, nil
		}
		if err := old.pull(); err != nil {
			return entrySplice{}, err
		}
	}
}

// rechunker cuts new content into stored chunks.
type rechunker struct {
	s       Store
	src     content
	old     *oldChunks
	entries []Entry
}

// cutWindow cuts the new content from pos, a real cut, to limit and stores
// every chunk that ends at a real cut, or at limit when atEnd says limit is
// the end of the file. It returns where the next chunk starts.
func (rc *rechunker) cutWindow(pos, limit int64, atEnd bool) (int64, error) {
	err := cutChunks(&window{c: &rc.src, pos: pos, end: limit}, func(data []byte, cut bool) error {
		end := pos + int64(len(data))
		if end == limit && !atEnd && !cut {
			return errWindowEnd
		}
		if err := rc.put(pos, data); err != nil {
			return err
		}
		pos = end
		return nil
	})
	if err != nil && !errors.Is(err, errWindowEnd) {
		return pos, err
	}
	return pos, nil
}

// put stores the chunk data at pos, with the old chunk it overlaps most as
// its delta base.
func (rc *rechunker) put(pos int64, data []byte) error {
	end := pos + int64(len(data))
	id, err := rc.s.PutChunk(bytes.Clone(data), rc.old.base(pos, end))
	if err != nil {
		return fmt.Errorf("put chunk at %d: %w", pos, err)
	}
	rc.entries = append(rc.entries, Entry{Len: int64(len(data)), ID: id})
	return nil
}

// oldChunks pulls, in order, the old chunks an edit replaces.
type oldChunks struct {
	cur        *cursor
	list       []Extent // pulled, and not behind the chunks cut so far
	start, end int64    // the pulled chunks cover [start, end)
}

// pullRange pulls the chunk holding offset from and the following ones
// that start before to. from at or past the end of the file pulls none.
func (o *oldChunks) pullRange(from, to int64) error {
	if err := o.cur.seek(max(from, 0)); err != nil {
		return err
	}
	o.start = o.cur.offset()
	o.end = o.start
	for !o.cur.done && o.cur.offset() < to {
		if err := o.pull(); err != nil {
			return err
		}
	}
	return nil
}

// pull takes the next old chunk.
func (o *oldChunks) pull() error {
	if o.cur.done {
		return fmt.Errorf("pull chunk past the end of the file: %w", object.ErrCorrupt)
	}
	e, off := o.cur.entry()
	o.list = append(o.list, Extent{Off: off, Len: e.Len, Chunk: e.ID})
	o.end = off + e.Len
	return o.cur.next()
}

// base returns the pulled chunk that shares the most offsets with the new
// chunk over [p0, p1), or object.Zero if none does. Edits keep the offsets
// of unchanged bytes, so that is the old chunk the new one replaces. Calls
// must come in file order.
func (o *oldChunks) base(p0, p1 int64) object.ID {
	for len(o.list) > 0 && o.list[0].End() <= p0 {
		o.list = o.list[1:]
	}
	best, most := object.Zero, int64(0)
	for _, e := range o.list {
		if e.Off >= p1 {
			break
		}
		if n := min(p1, e.End()) - max(p0, e.Off); n > most {
			best, most = e.Chunk, n
		}
	}
	return best
}
