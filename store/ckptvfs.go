package store

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// A checkpoint copies the WAL's pages into the database file one page at
// a time, a pread of the WAL and a pwrite of the database each. Storing a
// new 32 MiB file made 8,192 of each, and the pwrites, which grow the
// file, cost ~6 µs apiece on this kind of machine: ~50 ms of CPU a
// checkpoint, at background priority but on a two-core machine beside
// whatever runs next. Gathered, a Workspace's cold create of a 32 MiB
// file costs ~22 CPU ms less (the median of seven interleaved pairs'
// differences: 294–311 ms against 306–344). The lifecycle's time did not
// move: its critical path is the capture, not the checkpoint after it. The writer's VFS (walvfs.go) therefore also
// gathers a checkpoint's writes to the database file: from
// SQLITE_FCNTL_CKPT_START to SQLITE_FCNTL_CKPT_DONE, writes that continue
// the one before go to the file together, ckptBufSize at a time.
//
// A checkpoint's pages must all be in the file before SQLite records them
// as copied (the WAL-index's nBackfill), which it does right after
// CKPT_DONE without another call on the file that could report a
// failure. So:
//   - Only a checkpoint whose space is reserved gathers. Before the copy,
//     a checkpoint that grows the file says so (SQLITE_FCNTL_SIZE_HINT),
//     and the blocks of the whole file up to that size are allocated then
//     (fallocate: also any hole an earlier, failed one left). If that
//     fails (a full disk), or the checkpoint does not grow the file, its
//     writes go through one by one, as SQLite's own VFS makes them, and
//     SQLite sees the first that fails.
//   - A write that does not continue the last one, a full buffer, and
//     every other call on the file write what is gathered first and
//     report a failure to SQLite, which then stops the checkpoint.
//   - CKPT_DONE writes the rest. If that fails — in space already
//     reserved, so an I/O error — the process stops rather than let SQLite
//     record pages the file lacks. (The WAL keeps them: the next open
//     copies them again.)
//
// A checkpoint's reads of the WAL are gathered too, where they run in
// order: a read that follows the frame read before it, and that the
// read-ahead does not hold, reads ckptBufSize from where it starts. (A
// checkpoint goes in page order; a big file's pages are in the WAL in
// that order too, a small commit's are not, and one read-ahead per
// scattered frame would read a megabyte for each 4 KiB page.) Every
// frame a checkpoint copies was committed before it began, and none can
// change while it runs (it holds the WAL's first read lock, without
// which no writer starts the WAL over), so what the read-ahead holds of
// them stays true until CKPT_DONE drops it. Bytes past them, which a
// writer may be writing, are read but never asked for.
const ckptBufSize = 1 << 20

// dbFile is one open database file of the writer's VFS.
type dbFile struct {
	mu    sync.Mutex
	file  uintptr   // the sqlite3_file
	owner *libc.TLS // the connection's
	// inCkpt: a checkpoint is copying pages. gather: their space is
	// reserved and their writes are gathered; buf holds bytes for the
	// file at off, and end is where the last write ended.
	inCkpt bool
	gather bool
	buf    []byte // up to ckptBufSize
	off    int64
	end    int64
	// ahead holds the WAL's bytes at aheadOff, read ahead in a
	// checkpoint; walEnd is where the checkpoint's last WAL read ended.
	ahead    []byte
	aheadOff int64
	walEnd   int64
}

var dbFiles struct {
	mu      sync.Mutex
	files   map[uintptr]*dbFile
	byOwner map[*libc.TLS]*dbFile
	// inCkpt counts files in a checkpoint: while it is zero, calls on
	// database files go straight to the unix methods.
	inCkpt atomic.Int32
	// writes counts the checkpoint writes SQLite asked for, flushes the
	// writes of gathered bytes (for tests); failFlush makes a flush fail as
	// an I/O error would, failReserve a reservation as on a full disk.
	writes, flushes, aheadReads, aheadBytes atomic.Int64
	failFlush, failReserve                  atomic.Bool
}

func trackDBFile(tls *libc.TLS, pFile uintptr) {
	dbFiles.mu.Lock()
	defer dbFiles.mu.Unlock()
	if dbFiles.files == nil {
		dbFiles.files = map[uintptr]*dbFile{}
		dbFiles.byOwner = map[*libc.TLS]*dbFile{}
	}
	d := &dbFile{file: pFile, owner: tls, end: -1}
	dbFiles.files[pFile] = d
	dbFiles.byOwner[tls] = d
}

func dbFileOf(pFile uintptr) *dbFile {
	dbFiles.mu.Lock()
	defer dbFiles.mu.Unlock()
	return dbFiles.files[pFile]
}

// flushDB writes what the file has gathered, if anything.
func flushDB(tls *libc.TLS, pFile uintptr) int32 {
	if dbFiles.inCkpt.Load() == 0 {
		return sqlite3.SQLITE_OK
	}
	d := dbFileOf(pFile)
	if d == nil {
		return sqlite3.SQLITE_OK
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.flush()
}

// flush writes what d gathered; d.mu is held.
func (d *dbFile) flush() int32 {
	if len(d.buf) == 0 {
		return sqlite3.SQLITE_OK
	}
	rc := int32(sqlite3.SQLITE_IOERR_WRITE)
	if !dbFiles.failFlush.Load() {
		rc = d.pwrite(d.buf, d.off)
	}
	dbFiles.flushes.Add(1)
	d.buf = d.buf[:0]
	if rc != sqlite3.SQLITE_OK {
		d.end = -1
	}
	return rc
}

// pwrite writes p at off in one system call, or as few as it takes.
// (The unix VFS's xWrite writes at most 128 KiB at a time, and nothing if
// asked for a multiple of 128 KiB.)
func (d *dbFile) pwrite(p []byte, off int64) int32 {
	fd := int((*sqlite3.TunixFile)(cmem(d.file)).Fh)
	for len(p) > 0 {
		n, err := unix.Pwrite(fd, p, off)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.ENOSPC || err == unix.EDQUOT || err == nil && n == 0:
			return sqlite3.SQLITE_FULL
		case err != nil:
			return sqlite3.SQLITE_IOERR_WRITE
		}
		p, off = p[n:], off+int64(n)
	}
	return sqlite3.SQLITE_OK
}

// checkpointing starts or ends a checkpoint; d.mu is held. It starts
// without gathering.
func (d *dbFile) checkpointing(on bool) {
	if d.inCkpt == on {
		return
	}
	d.inCkpt, d.gather = on, false
	d.end, d.walEnd = -1, -1
	if on {
		dbFiles.inCkpt.Add(1)
		return
	}
	dbFiles.inCkpt.Add(-1)
	d.buf, d.ahead = nil, nil // a big file's checkpoints are rare
}

func dbWrite(tls *libc.TLS, pFile, zBuf uintptr, iAmt int32, iOfst int64) int32 {
	if dbFiles.inCkpt.Load() == 0 {
		return call[rwFunc](dbOrigM.FxWrite)(tls, pFile, zBuf, iAmt, iOfst)
	}
	d := dbFileOf(pFile)
	if d == nil {
		return call[rwFunc](dbOrigM.FxWrite)(tls, pFile, zBuf, iAmt, iOfst)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.gather {
		return call[rwFunc](dbOrigM.FxWrite)(tls, pFile, zBuf, iAmt, iOfst)
	}
	dbFiles.writes.Add(1)
	n := int(iAmt)
	if iOfst != d.end || n > ckptBufSize {
		if rc := d.flush(); rc != sqlite3.SQLITE_OK {
			return rc
		}
		d.end = iOfst + int64(n)
		return call[rwFunc](dbOrigM.FxWrite)(tls, pFile, zBuf, iAmt, iOfst)
	}
	if len(d.buf)+n > ckptBufSize {
		if rc := d.flush(); rc != sqlite3.SQLITE_OK {
			return rc
		}
	}
	if d.buf == nil {
		d.buf = make([]byte, 0, ckptBufSize)
	}
	if len(d.buf) == 0 {
		d.off = iOfst
	}
	d.buf = append(d.buf, unsafe.Slice((*byte)(cmem(zBuf)), n)...)
	d.end += int64(n)
	return sqlite3.SQLITE_OK
}

// dbFileControl starts and ends a checkpoint's gathering, and reserves
// the space a checkpoint will grow the file to.
func dbFileControl(tls *libc.TLS, pFile uintptr, op int32, arg uintptr) int32 {
	orig := call[fcntlFunc](dbOrigM.FxFileControl)
	switch op {
	case sqlite3.SQLITE_FCNTL_CKPT_START:
		if d := dbFileOf(pFile); d != nil {
			d.mu.Lock()
			d.checkpointing(true)
			d.mu.Unlock()
		}
	case sqlite3.SQLITE_FCNTL_SIZE_HINT:
		if d := dbFileOf(pFile); d != nil {
			d.mu.Lock()
			if d.inCkpt && len(d.buf) == 0 {
				d.gather = d.reserve(*(*int64)(cmem(arg))) == nil
			}
			d.mu.Unlock()
		}
	case sqlite3.SQLITE_FCNTL_CKPT_DONE:
		if d := dbFileOf(pFile); d != nil {
			d.mu.Lock()
			rc := d.flush()
			d.checkpointing(false)
			d.mu.Unlock()
			if rc != sqlite3.SQLITE_OK {
				panic(fmt.Sprintf("layerfs: writing a checkpoint's pages to the database file failed (SQLite code %d) where SQLite cannot be told; stopping before it records them as copied", rc))
			}
		}
	default:
		if rc := flushDB(tls, pFile); rc != sqlite3.SQLITE_OK {
			return rc
		}
	}
	return orig(tls, pFile, op, arg)
}

// reserve allocates the file's blocks up to size — its holes too — so
// that no write of the checkpoint below it can find the disk full; d.mu
// is held.
func (d *dbFile) reserve(size int64) error {
	if dbFiles.failReserve.Load() {
		return unix.ENOSPC
	}
	return unix.Fallocate(int((*sqlite3.TunixFile)(cmem(d.file)).Fh), 0, 0, size)
}

func dbClose(tls *libc.TLS, pFile uintptr) int32 {
	rc := int32(sqlite3.SQLITE_OK)
	dbFiles.mu.Lock()
	d := dbFiles.files[pFile]
	delete(dbFiles.files, pFile)
	if d != nil && dbFiles.byOwner[d.owner] == d {
		delete(dbFiles.byOwner, d.owner)
	}
	dbFiles.mu.Unlock()
	if d != nil {
		d.mu.Lock()
		rc = d.flush()
		d.checkpointing(false)
		d.mu.Unlock()
	}
	if crc := call[closeFunc](dbOrigM.FxClose)(tls, pFile); rc == sqlite3.SQLITE_OK {
		rc = crc
	}
	return rc
}

// ckptRead reads n bytes at off of the WAL file f into buf from the
// read-ahead, if the connection whose TLS tls is is in a checkpoint and
// the read-ahead holds them or the read follows the one before; ok says
// it did.
func ckptRead(tls *libc.TLS, f, buf uintptr, n int32, off int64) (rc int32, ok bool) {
	dbFiles.mu.Lock()
	d := dbFiles.byOwner[tls]
	dbFiles.mu.Unlock()
	if d == nil {
		return 0, false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.inCkpt || n <= 0 {
		return 0, false
	}
	last := d.walEnd
	d.walEnd = off + int64(n)
	if off < d.aheadOff || off+int64(n) > d.aheadOff+int64(len(d.ahead)) {
		if last < 0 || off < last || off > last+walFrameHeader {
			return 0, false // not in order: read just this
		}
		if d.ahead == nil {
			d.ahead = make([]byte, 0, ckptBufSize)
		}
		fd := int((*sqlite3.TunixFile)(cmem(f)).Fh)
		got, err := readFull(fd, d.ahead[:cap(d.ahead)], off)
		dbFiles.aheadBytes.Add(int64(got))
		d.ahead, d.aheadOff = d.ahead[:got], off
		if err != nil || got < int(n) {
			d.ahead = d.ahead[:0]
			return 0, false // SQLite's own read reports it
		}
	}
	dbFiles.aheadReads.Add(1)
	start := off - d.aheadOff
	copy(unsafe.Slice((*byte)(cmem(buf)), n), d.ahead[start:start+int64(n)])
	return sqlite3.SQLITE_OK, true
}

// readFull reads p at off, short only at the file's end.
func readFull(fd int, p []byte, off int64) (int, error) {
	got := 0
	for got < len(p) {
		n, err := unix.Pread(fd, p[got:], off+int64(got))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return got, err
		}
		if n == 0 {
			break
		}
		got += n
	}
	return got, nil
}

// The other methods that touch the file write what is gathered first.

func dbRead(tls *libc.TLS, f, buf uintptr, n int32, off int64) int32 {
	if rc := flushDB(tls, f); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return call[rwFunc](dbOrigM.FxRead)(tls, f, buf, n, off)
}

func dbTruncate(tls *libc.TLS, f uintptr, size int64) int32 {
	if rc := flushDB(tls, f); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return call[truncFunc](dbOrigM.FxTruncate)(tls, f, size)
}

func dbSync(tls *libc.TLS, f uintptr, flags int32) int32 {
	if rc := flushDB(tls, f); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return call[intFunc](dbOrigM.FxSync)(tls, f, flags)
}

func dbFileSize(tls *libc.TLS, f, pSize uintptr) int32 {
	if rc := flushDB(tls, f); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return call[ptrFunc](dbOrigM.FxFileSize)(tls, f, pSize)
}

func dbLock(tls *libc.TLS, f uintptr, level int32) int32 {
	if rc := flushDB(tls, f); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return call[intFunc](dbOrigM.FxLock)(tls, f, level)
}

func dbUnlock(tls *libc.TLS, f uintptr, level int32) int32 {
	flushDB(tls, f) // an unlock goes ahead whatever (see dbShmLock)
	return call[intFunc](dbOrigM.FxUnlock)(tls, f, level)
}

func dbFetch(tls *libc.TLS, f uintptr, off int64, n int32, pp uintptr) int32 {
	if rc := flushDB(tls, f); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return call[fetchFunc](dbOrigM.FxFetch)(tls, f, off, n, pp)
}

type fetchFunc = func(*libc.TLS, uintptr, int64, int32, uintptr) int32
