package store

import (
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/layerfs/layerfs/object"
)

// rawRunQuery is runQuery without its ID list: it reads every row between
// the first and the last ID asked for, and readRun skips those not asked
// for on their ID alone, before SQLite reads their data, which costs less
// than building and probing the list (~3% of reading a chunk).
var rawRunQuery = `SELECT id, kind, size, enc, data FROM objects NOT INDEXED
WHERE seq BETWEEN (SELECT min(seq) FROM objects WHERE id IN (?1, ?2))
	AND (SELECT CASE WHEN max(seq) - min(seq) < ?3 THEN max(seq) ELSE 0 END FROM objects WHERE id IN (?1, ?2))`

// GetManyInto reads runs of objects through SQLite's own API (modernc's
// lib) rather than database/sql, so that their bytes land in buffers the
// caller recycles. The driver copies every blob it returns into a new Go
// slice: reading the chunks of a 1 GiB file so cost ~2.0 s of CPU, against
// ~1.3 s when the bytes went into a reused buffer instead — zeroing fresh
// memory, faulting it in and collecting it was a third of the work.
//
// A rawConn is one such connection, used by one goroutine at a time.
type rawConn struct {
	tls *libc.TLS
	db  uintptr
	run uintptr // rawRunQuery, prepared
	ids uintptr // the first and last ID, bound to run
}

// rawPool keeps the raw connections of a Store: as many as the Store
// has database/sql readers at most (each holds its own mapping of the
// file and page cache); a reader that finds all of them busy waits.
type rawPool struct {
	mu     sync.Mutex
	slots  chan struct{} // one per connection open or opening
	idle   []*rawConn
	closed bool
}

// errRawClosed is what a raw read meets after Close.
var errRawClosed = errors.New("raw reader closed")

func (p *rawPool) get(s *Store) (*rawConn, error) {
	p.mu.Lock()
	if p.slots == nil {
		p.slots = make(chan struct{}, readerConns())
	}
	slots := p.slots
	p.mu.Unlock()
	slots <- struct{}{}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-slots
		return nil, errRawClosed
	}
	if n := len(p.idle); n > 0 {
		c := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return c, nil
	}
	p.mu.Unlock()
	c, err := openRaw(s.path, s.opts.BusyTimeout)
	if err != nil {
		<-slots
	}
	return c, err
}

func (p *rawPool) put(c *rawConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.close()
	} else {
		p.idle = append(p.idle, c)
	}
	<-p.slots
}

func (p *rawPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, c := range p.idle {
		c.close()
	}
	p.idle = nil
}

// openRaw opens a read-only connection as the driver's readers are
// (query_only, mmap) and prepares rawRunQuery on it.
func openRaw(path string, busy time.Duration) (_ *rawConn, err error) {
	c := &rawConn{tls: libc.NewTLS()}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	name, err := libc.CString(path)
	if err != nil {
		return nil, err
	}
	defer libc.Xfree(c.tls, name)
	pdb := libc.Xmalloc(c.tls, 8)
	if pdb == 0 {
		return nil, errors.New("sqlite: out of memory")
	}
	defer libc.Xfree(c.tls, pdb)
	*(*uintptr)(cmem(pdb)) = 0
	rc := sqlite3.Xsqlite3_open_v2(c.tls, name, pdb, sqlite3.SQLITE_OPEN_READWRITE|sqlite3.SQLITE_OPEN_NOMUTEX, 0)
	c.db = *(*uintptr)(cmem(pdb))
	if rc != sqlite3.SQLITE_OK {
		return nil, c.err(rc)
	}
	sqlite3.Xsqlite3_busy_timeout(c.tls, c.db, int32(busy.Milliseconds()))
	for _, q := range []string{"PRAGMA query_only = 1", "PRAGMA mmap_size = 1099511627776"} {
		if err := c.exec(q); err != nil {
			return nil, err
		}
	}
	if c.run, err = c.prepare(rawRunQuery); err != nil {
		return nil, err
	}
	if c.ids = libc.Xmalloc(c.tls, 2*object.Size); c.ids == 0 {
		return nil, errors.New("sqlite: out of memory")
	}
	return c, nil
}

func (c *rawConn) close() {
	if c.run != 0 {
		sqlite3.Xsqlite3_finalize(c.tls, c.run)
	}
	if c.db != 0 {
		sqlite3.Xsqlite3_close_v2(c.tls, c.db)
	}
	if c.ids != 0 {
		libc.Xfree(c.tls, c.ids)
	}
	c.tls.Close()
}

// err describes a result code with the connection's message.
func (c *rawConn) err(rc int32) error {
	msg := "unknown error"
	if c.db != 0 {
		msg = libc.GoString(sqlite3.Xsqlite3_errmsg(c.tls, c.db))
	}
	return fmt.Errorf("sqlite: %s (%d)", msg, rc)
}

func (c *rawConn) exec(q string) error {
	cq, err := libc.CString(q)
	if err != nil {
		return err
	}
	defer libc.Xfree(c.tls, cq)
	if rc := sqlite3.Xsqlite3_exec(c.tls, c.db, cq, 0, 0, 0); rc != sqlite3.SQLITE_OK {
		return fmt.Errorf("%s: %w", q, c.err(rc))
	}
	return nil
}

func (c *rawConn) prepare(q string) (uintptr, error) {
	cq, err := libc.CString(q)
	if err != nil {
		return 0, err
	}
	defer libc.Xfree(c.tls, cq)
	pst := libc.Xmalloc(c.tls, 8)
	if pst == 0 {
		return 0, errors.New("sqlite: out of memory")
	}
	defer libc.Xfree(c.tls, pst)
	if rc := sqlite3.Xsqlite3_prepare_v2(c.tls, c.db, cq, -1, pst, 0); rc != sqlite3.SQLITE_OK {
		return 0, fmt.Errorf("prepare %q: %w", q, c.err(rc))
	}
	return *(*uintptr)(cmem(pst)), nil
}

// cmem turns an address in SQLite's memory into a pointer. That memory is
// modernc's C heap, outside Go's, so the garbage collector neither moves
// nor frees it, which is what go vet's check of uintptr conversions is
// about; reading the address through a pointer keeps vet quiet.
func cmem(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

// blob returns column i of the current row as a view of SQLite's memory,
// valid until the statement moves on.
func (c *rawConn) blob(st uintptr, i int32) []byte {
	p := sqlite3.Xsqlite3_column_blob(c.tls, st, i)
	n := int(sqlite3.Xsqlite3_column_bytes(c.tls, st, i))
	if p == 0 || n == 0 {
		return nil
	}
	return (*libc.RawMem)(cmem(p))[:n:n]
}

// GetManyInto is GetMany for callers that recycle buffers: each object's
// bytes are written into alloc(n), n being its length, and fn gets that
// buffer cut to n bytes, verified — or an error, and then no buffer. An
// object not stored in one run with the others is read as GetMany would
// and copied into its buffer.
func (s *Store) GetManyInto(ids []object.ID, k object.Kind, alloc func(n int) []byte, fn func(id object.ID, data []byte, err error)) error {
	ids = distinct(ids)
	for len(ids) > 0 {
		n := min(len(ids), GetManyMax)
		rest, err := s.getRunInto(ids[:n], k, alloc, fn)
		if err == nil && len(rest) > 0 {
			err = s.GetMany(rest, k, func(id object.ID, data []byte, err error) {
				if err != nil {
					fn(id, nil, err)
					return
				}
				buf := alloc(len(data))[:len(data)]
				copy(buf, data)
				fn(id, buf, nil)
			})
		}
		if err != nil {
			return err
		}
		ids = ids[n:]
	}
	return nil
}

// getRunInto reads those of up to GetManyMax ids that rawRunQuery finds
// and returns the others, in their order.
func (s *Store) getRunInto(ids []object.ID, k object.Kind, alloc func(n int) []byte, fn func(id object.ID, data []byte, err error)) ([]object.ID, error) {
	if len(ids) < 2 {
		return ids, nil
	}
	c, err := s.raw.get(s)
	if errors.Is(err, errRawClosed) {
		return nil, fmt.Errorf("read %d objects: %w", len(ids), err)
	}
	if err != nil {
		return ids, nil // GetMany reads them, as it would without this path
	}
	pending := make(map[object.ID]bool, len(ids))
	for _, id := range ids {
		pending[id] = true
	}
	var later []object.ID // delta-encoded: read once the statement is done
	want := func(id object.ID) bool { return pending[id] }
	err = c.readRun(ids, want, func(id object.ID, kind object.Kind, size, enc int, data []byte) {
		delete(pending, id)
		if enc == encDelta {
			later = append(later, id)
			return
		}
		buf, err := s.decodeInto(id, kind, k, size, enc, data, alloc)
		fn(id, buf, err)
	})
	s.raw.put(c)
	if err != nil {
		return nil, fmt.Errorf("read %d objects: %w", len(ids), err)
	}
	var rest []object.ID
	for _, id := range ids {
		if pending[id] {
			rest = append(rest, id)
		}
	}
	return append(rest, later...), nil
}

// readRun runs rawRunQuery for ids and calls fn with each row whose ID
// want reports; data is a view of SQLite's memory, valid during the call.
func (c *rawConn) readRun(ids []object.ID, want func(object.ID) bool, fn func(id object.ID, kind object.Kind, size, enc int, data []byte)) error {
	bound := (*libc.RawMem)(cmem(c.ids))[: 2*object.Size : 2*object.Size]
	copy(bound, ids[0][:])
	copy(bound[object.Size:], ids[len(ids)-1][:])
	for i := int32(0); i < 2; i++ {
		if rc := sqlite3.Xsqlite3_bind_blob(c.tls, c.run, i+1, c.ids+uintptr(i)*object.Size, object.Size, 0); rc != sqlite3.SQLITE_OK {
			return c.err(rc)
		}
	}
	if rc := sqlite3.Xsqlite3_bind_int64(c.tls, c.run, 3, int64(runSlack*len(ids))); rc != sqlite3.SQLITE_OK {
		return c.err(rc)
	}
	defer sqlite3.Xsqlite3_reset(c.tls, c.run)
	for {
		switch rc := sqlite3.Xsqlite3_step(c.tls, c.run); rc {
		case sqlite3.SQLITE_ROW:
			id, err := object.FromBytes(c.blob(c.run, 0))
			if err != nil || !want(id) {
				continue
			}
			kind := object.Kind(sqlite3.Xsqlite3_column_int64(c.tls, c.run, 1))
			size := int(sqlite3.Xsqlite3_column_int64(c.tls, c.run, 2))
			enc := int(sqlite3.Xsqlite3_column_int64(c.tls, c.run, 3))
			fn(id, kind, size, enc, c.blob(c.run, 4))
		case sqlite3.SQLITE_DONE:
			return nil
		default:
			return c.err(rc)
		}
	}
}

// decodeInto decodes and verifies a row that is not a delta into a buffer
// from alloc.
func (s *Store) decodeInto(id object.ID, kind, k object.Kind, size, enc int, data []byte, alloc func(n int) []byte) ([]byte, error) {
	if kind != k {
		return nil, wrongKind(id, kind, k)
	}
	var buf []byte
	switch enc {
	case encRaw:
		buf = alloc(len(data))[:len(data)]
		copy(buf, data)
	case encZstd:
		if size < 0 {
			return nil, fmt.Errorf("object %s: size %d: %w", id.Short(), size, ErrCorrupt)
		}
		dst := alloc(size)[:0:size]
		out, err := s.codec.dec.DecodeAll(data, dst)
		if err != nil || len(out) != size {
			return nil, fmt.Errorf("object %s: decode: %v: %w", id.Short(), err, ErrCorrupt)
		}
		buf = out
	default:
		return nil, fmt.Errorf("object %s: unknown encoding %d: %w", id.Short(), enc, ErrCorrupt)
	}
	if object.Sum(k, buf) != id {
		return nil, fmt.Errorf("object %s: stored bytes do not hash to its id: %w", id.Short(), ErrCorrupt)
	}
	return buf, nil
}
