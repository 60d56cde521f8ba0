package store

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// The writer's VFS. SQLite appends a WAL frame in two pwrite calls, its
// 24-byte header and its page, so a small commit (~23 frames) made ~46
// system calls, each growing the file — ~8 µs a frame on this kind of
// machine, ~15% of a commit. A pack of a 32 MiB file made 16,000. This
// VFS is SQLite's own unix VFS with one change to WAL files: writes that
// continue the one before are gathered in a buffer and reach the file in
// one pwrite (up to 31 frames), ~2 µs a frame.
//
// A commit is safe as long as its frames are in the file before the
// WAL-index header that makes them visible is written, which SQLite does
// right after writing the commit frame (the last frame of a transaction,
// the one whose header holds the database size). So the buffer is
// flushed as soon as the commit frame is in it, by the write that
// completes it, whose result SQLite checks: a failed flush (disk full)
// fails the commit before anything points at its frames. Every other
// call on the WAL file that reads or sizes it flushes first and reports
// a failure. A write that does not continue the last one (SQLite
// rewriting a frame in place) is written through at once, after the
// buffer. A transaction that rolls back may leave frames in the buffer:
// they are written when the connection lets go of a WAL-index lock; a
// failure to write them is harmless (nothing names them), so the unlock
// always goes ahead. When SQLite publishes a header (a WAL-index barrier)
// nothing can be left; if something were, and could not be written, the
// process stops rather than let SQLite publish frames the file lacks.
//
// A connection only ever flushes its own buffer: modernc gives each
// connection a TLS of its own, which the buffer records. The writer and
// checkpointer connections use this VFS; only the writer writes frames.
// Readers only ever read frames a published header names.
const (
	walVFSName = "layerfs-wal"
	// walBufSize is the most a WAL file gathers before it writes: the
	// most the unix VFS writes at once (it masks a length with 0x1ffff),
	// 31 frames of 4 KiB pages.
	walBufSize = 0x1ffff
	// walFrameHeader is the size of a WAL frame header.
	walFrameHeader = 24
)

var walVFS struct {
	once sync.Once
	err  error
	// unixOpen is the unix VFS's xOpen.
	unixOpen uintptr

	mu      sync.Mutex
	files   map[uintptr]*walFile // by the address of their sqlite3_file
	byOwner map[*libc.TLS]*walFile
	// walOrig and dbOrig are the unix methods of WAL and database
	// files, which walMethods and dbMethods forward to.
	walOrig, dbOrig uintptr
	// pending counts files whose buffer holds bytes.
	pending atomic.Int32
	// writes counts the WAL writes SQLite asked for, flushes the writes
	// of gathered bytes (for tests).
	writes, flushes atomic.Int64
	// failFlush makes flushes fail as on a full disk (for tests); late
	// counts the buffers that still held bytes at a WAL-index barrier,
	// which the commit frame should have flushed.
	failFlush atomic.Bool
	late      atomic.Int64
}

var walMethods, dbMethods sqlite3.Tsqlite3_io_methods

// registerWALVFS registers the writer's VFS with SQLite, once.
func registerWALVFS() error {
	walVFS.once.Do(func() { walVFS.err = doRegisterWALVFS() })
	return walVFS.err
}

func doRegisterWALVFS() error {
	tls := libc.NewTLS()
	defer tls.Close()
	unix := sqlite3.Xsqlite3_vfs_find(tls, 0)
	if unix == 0 {
		return fmt.Errorf("sqlite: no default VFS")
	}
	name, err := libc.CString(walVFSName)
	if err != nil {
		return err
	}
	v := libc.Xcalloc(tls, 1, libc.Tsize_t(unsafe.Sizeof(sqlite3.Tsqlite3_vfs{})))
	if v == 0 {
		return fmt.Errorf("sqlite: out of memory")
	}
	vfs := (*sqlite3.Tsqlite3_vfs)(cmem(v))
	*vfs = *(*sqlite3.Tsqlite3_vfs)(cmem(unix))
	walVFS.unixOpen = vfs.FxOpen
	walVFS.files = map[uintptr]*walFile{}
	walVFS.byOwner = map[*libc.TLS]*walFile{}
	vfs.FzName, vfs.FpNext = name, 0
	setFunc(&vfs.FxOpen, walOpen)
	if rc := sqlite3.Xsqlite3_vfs_register(tls, v, 0); rc != sqlite3.SQLITE_OK {
		return fmt.Errorf("sqlite: register VFS %s: code %d", walVFSName, rc)
	}
	return nil
}

// setFunc stores f in a C function pointer field, as modernc's
// transpiled code does.
func setFunc[F any](field *uintptr, f F) {
	*(*F)(unsafe.Pointer(field)) = f
}

// call returns the function a C function pointer holds.
func call[F any](fp uintptr) F {
	return *(*F)(unsafe.Pointer(&struct{ uintptr }{fp}))
}

type (
	openFunc     = func(*libc.TLS, uintptr, uintptr, uintptr, int32, uintptr) int32
	closeFunc    = func(*libc.TLS, uintptr) int32
	rwFunc       = func(*libc.TLS, uintptr, uintptr, int32, int64) int32
	truncFunc    = func(*libc.TLS, uintptr, int64) int32
	intFunc      = func(*libc.TLS, uintptr, int32) int32
	ptrFunc      = func(*libc.TLS, uintptr, uintptr) int32
	fcntlFunc    = func(*libc.TLS, uintptr, int32, uintptr) int32
	shmLockFunc  = func(*libc.TLS, uintptr, int32, int32, int32) int32
	shmBarrierFn = func(*libc.TLS, uintptr)
)

// walFile is the buffer of one open WAL file.
type walFile struct {
	mu    sync.Mutex
	file  uintptr   // the sqlite3_file
	owner *libc.TLS // the connection's
	// buf holds n bytes for the file at off; end is where the last
	// write ended (a write there is gathered).
	buf      uintptr // C memory, walBufSize; allocated on first use
	n        int
	off, end int64
	// commit: the last write gathered was the header of a commit frame,
	// so the frame is complete once its page follows.
	commit bool
}

func fileStruct(pFile uintptr) *sqlite3.Tsqlite3_file {
	return (*sqlite3.Tsqlite3_file)(cmem(pFile))
}

func walOpen(tls *libc.TLS, pVfs, zName, pFile uintptr, flags int32, pOutFlags uintptr) int32 {
	rc := call[openFunc](walVFS.unixOpen)(tls, pVfs, zName, pFile, flags, pOutFlags)
	if rc != sqlite3.SQLITE_OK || fileStruct(pFile).FpMethods == 0 {
		return rc
	}
	orig := fileStruct(pFile).FpMethods
	walVFS.mu.Lock()
	defer walVFS.mu.Unlock()
	switch {
	case flags&sqlite3.SQLITE_OPEN_WAL != 0:
		if walVFS.walOrig == 0 {
			walVFS.walOrig = orig
			wrapWALMethods(orig)
		}
		if orig != walVFS.walOrig {
			return rc // not the methods wrapped: leave it alone
		}
		w := &walFile{file: pFile, owner: tls, end: -1}
		walVFS.files[pFile] = w
		walVFS.byOwner[tls] = w
		fileStruct(pFile).FpMethods = uintptr(unsafe.Pointer(&walMethods))
	case flags&sqlite3.SQLITE_OPEN_MAIN_DB != 0:
		if walVFS.dbOrig == 0 {
			walVFS.dbOrig = orig
			wrapDBMethods(orig)
		}
		if orig == walVFS.dbOrig {
			trackDBFile(tls, pFile)
			fileStruct(pFile).FpMethods = uintptr(unsafe.Pointer(&dbMethods))
		}
	}
	return rc
}

// wrapWALMethods makes walMethods the unix methods with every one that
// touches the file flushing the buffer first, and xWrite gathering. The
// methods are top-level functions: a C function pointer is a uintptr the
// garbage collector does not see, so it must not point at a closure.
func wrapWALMethods(orig uintptr) {
	walOrigM = *(*sqlite3.Tsqlite3_io_methods)(cmem(orig))
	walMethods = walOrigM
	setFunc(&walMethods.FxWrite, walWrite)
	setFunc(&walMethods.FxClose, walClose)
	setFunc(&walMethods.FxRead, walRead)
	setFunc(&walMethods.FxTruncate, walTruncate)
	setFunc(&walMethods.FxSync, walSync)
	setFunc(&walMethods.FxFileSize, walFileSize)
	setFunc(&walMethods.FxFileControl, walFileControl)
}

// wrapDBMethods makes dbMethods the unix methods with the WAL-index
// unlock and barrier flushing the connection's WAL buffer first, and a
// checkpoint's writes gathered (ckptvfs.go).
func wrapDBMethods(orig uintptr) {
	dbOrigM = *(*sqlite3.Tsqlite3_io_methods)(cmem(orig))
	dbMethods = dbOrigM
	setFunc(&dbMethods.FxShmLock, dbShmLock)
	setFunc(&dbMethods.FxShmBarrier, dbShmBarrier)
	setFunc(&dbMethods.FxWrite, dbWrite)
	setFunc(&dbMethods.FxFileControl, dbFileControl)
	setFunc(&dbMethods.FxClose, dbClose)
	setFunc(&dbMethods.FxRead, dbRead)
	setFunc(&dbMethods.FxTruncate, dbTruncate)
	setFunc(&dbMethods.FxSync, dbSync)
	setFunc(&dbMethods.FxFileSize, dbFileSize)
	setFunc(&dbMethods.FxLock, dbLock)
	setFunc(&dbMethods.FxUnlock, dbUnlock)
	setFunc(&dbMethods.FxFetch, dbFetch)
}

var walOrigM, dbOrigM sqlite3.Tsqlite3_io_methods

func walClose(tls *libc.TLS, f uintptr) int32 {
	rc := int32(sqlite3.SQLITE_OK)
	walVFS.mu.Lock()
	w := walVFS.files[f]
	delete(walVFS.files, f)
	if w != nil && walVFS.byOwner[w.owner] == w {
		delete(walVFS.byOwner, w.owner)
	}
	walVFS.mu.Unlock()
	if w != nil {
		w.mu.Lock()
		rc = w.flush(tls)
		if w.buf != 0 {
			libc.Xfree(tls, w.buf)
			w.buf = 0
		}
		w.mu.Unlock()
	}
	if crc := call[closeFunc](walOrigM.FxClose)(tls, f); rc == sqlite3.SQLITE_OK {
		rc = crc
	}
	return rc
}

func walRead(tls *libc.TLS, f, buf uintptr, n int32, off int64) int32 {
	if rc := flushFile(tls, f); rc != sqlite3.SQLITE_OK {
		return rc
	}
	if dbFiles.inCkpt.Load() > 0 {
		if rc, ok := ckptRead(tls, f, buf, n, off); ok {
			return rc
		}
	}
	return call[rwFunc](walOrigM.FxRead)(tls, f, buf, n, off)
}

func walTruncate(tls *libc.TLS, f uintptr, size int64) int32 {
	if rc := flushFile(tls, f); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return call[truncFunc](walOrigM.FxTruncate)(tls, f, size)
}

func walSync(tls *libc.TLS, f uintptr, flags int32) int32 {
	if rc := flushFile(tls, f); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return call[intFunc](walOrigM.FxSync)(tls, f, flags)
}

func walFileSize(tls *libc.TLS, f, pSize uintptr) int32 {
	if rc := flushFile(tls, f); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return call[ptrFunc](walOrigM.FxFileSize)(tls, f, pSize)
}

func walFileControl(tls *libc.TLS, f uintptr, op int32, arg uintptr) int32 {
	if rc := flushFile(tls, f); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return call[fcntlFunc](walOrigM.FxFileControl)(tls, f, op, arg)
}

// dbShmLock writes what a rolled-back transaction left gathered before
// the connection lets go of a WAL-index lock; the unlock goes ahead
// whatever that write did (SQLite ignores an unlock's result and forgets
// the lock: one refused would stay held for good).
func dbShmLock(tls *libc.TLS, f uintptr, ofst, n, flags int32) int32 {
	if flags&sqlite3.SQLITE_SHM_UNLOCK != 0 {
		flushOwn(tls)
		flushDB(tls, f)
	} else if rc := flushDB(tls, f); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return call[shmLockFunc](dbOrigM.FxShmLock)(tls, f, ofst, n, flags)
}

// dbShmBarrier comes between the two copies of a WAL-index header SQLite
// publishes. Nothing of the connection's can be gathered by then (the
// commit frame flushed it); if something were and could not be written,
// SQLite would go on to publish frames the file lacks, so the process
// stops instead.
func dbShmBarrier(tls *libc.TLS, f uintptr) {
	rc, flushed := flushOwn(tls)
	if flushed {
		walVFS.late.Add(1)
	}
	if rc == sqlite3.SQLITE_OK {
		rc = flushDB(tls, f)
	}
	if rc != sqlite3.SQLITE_OK {
		panic(fmt.Sprintf("layerfs: a WAL write failed (SQLite code %d) where SQLite cannot be told; stopping before it publishes the frames", rc))
	}
	call[shmBarrierFn](dbOrigM.FxShmBarrier)(tls, f)
}

func fileOf(pFile uintptr) *walFile {
	walVFS.mu.Lock()
	defer walVFS.mu.Unlock()
	return walVFS.files[pFile]
}

func walWrite(tls *libc.TLS, pFile, zBuf uintptr, iAmt int32, iOfst int64) int32 {
	w := fileOf(pFile)
	w.mu.Lock()
	defer w.mu.Unlock()
	walVFS.writes.Add(1)
	n := int(iAmt)
	src := unsafe.Slice((*byte)(cmem(zBuf)), n)
	// This write completes a commit frame if the one before was a commit
	// frame's header, whichever way that went. A frame header's bytes 4-7
	// hold the database size for a commit frame and zero for any other.
	completes := w.commit
	w.commit = n == walFrameHeader && binary.BigEndian.Uint32(src[4:8]) != 0
	if iOfst != w.end || n > walBufSize {
		// Not a continuation: what is gathered goes first, then this.
		if rc := w.flush(tls); rc != sqlite3.SQLITE_OK {
			return rc
		}
		w.end = iOfst + int64(n)
		return call[rwFunc](walOrigM.FxWrite)(tls, pFile, zBuf, iAmt, iOfst)
	}
	if w.n+n > walBufSize {
		if rc := w.flush(tls); rc != sqlite3.SQLITE_OK {
			return rc
		}
	}
	if w.buf == 0 {
		if w.buf = libc.Xmalloc(tls, walBufSize); w.buf == 0 {
			return sqlite3.SQLITE_NOMEM
		}
	}
	if w.n == 0 {
		w.off = iOfst
		walVFS.pending.Add(1)
	}
	copy(unsafe.Slice((*byte)(cmem(w.buf+uintptr(w.n))), n), src)
	w.n += n
	w.end += int64(n)
	if completes {
		return w.flush(tls)
	}
	return sqlite3.SQLITE_OK
}

// flush writes what w gathered; w.mu is held. Bytes that fail to land
// are dropped with the failure: SQLite fails the transaction they belong
// to, or they belong to one rolled back.
func (w *walFile) flush(tls *libc.TLS) int32 {
	if w.n == 0 {
		return sqlite3.SQLITE_OK
	}
	rc := int32(sqlite3.SQLITE_FULL)
	if !walVFS.failFlush.Load() {
		rc = call[rwFunc](walOrigM.FxWrite)(tls, w.file, w.buf, int32(w.n), w.off)
	}
	walVFS.flushes.Add(1)
	w.n = 0
	walVFS.pending.Add(-1)
	if rc != sqlite3.SQLITE_OK {
		w.end = -1
	}
	return rc
}

func flushFile(tls *libc.TLS, pFile uintptr) int32 {
	w := fileOf(pFile)
	if w == nil {
		return sqlite3.SQLITE_OK
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flush(tls)
}

// flushOwn flushes the WAL buffer of the connection whose TLS tls is,
// and says whether it held anything.
func flushOwn(tls *libc.TLS) (int32, bool) {
	if walVFS.pending.Load() == 0 {
		return sqlite3.SQLITE_OK, false
	}
	walVFS.mu.Lock()
	w := walVFS.byOwner[tls]
	walVFS.mu.Unlock()
	if w == nil {
		return sqlite3.SQLITE_OK, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	held := w.n > 0
	return w.flush(tls), held
}
