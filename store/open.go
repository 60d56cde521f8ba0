package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	_ "modernc.org/sqlite" // the pure-Go SQLite driver
)

// Durability says what a commit promises when the machine loses power.
type Durability int

const (
	// Normal (synchronous=NORMAL in WAL mode): a power loss may lose the
	// newest commits but never corrupts the Store. The default.
	Normal Durability = iota
	// Fast (synchronous=OFF): nothing is fsynced; a host crash or power loss
	// may lose recent commits and, rarely, corrupt the file. Process crashes
	// lose nothing. For scratch Stores and benchmarks.
	Fast
	// Full (synchronous=FULL): every commit is fsynced before it returns.
	Full
)

var durabilityNames = []string{Normal: "normal", Fast: "fast", Full: "full"}

func (d Durability) String() string {
	if int(d) < len(durabilityNames) {
		return durabilityNames[d]
	}
	return fmt.Sprintf("durability(%d)", int(d))
}

func (d Durability) pragma() string {
	return map[Durability]string{Normal: "NORMAL", Fast: "OFF", Full: "FULL"}[d]
}

// ParseDurability reads "fast", "normal" or "full".
func ParseDurability(s string) (Durability, error) {
	for d, name := range durabilityNames {
		if s == name {
			return Durability(d), nil
		}
	}
	return Normal, fmt.Errorf("durability %q: want fast, normal or full", s)
}

// Options control Open. The zero value opens an existing Store in Normal
// durability.
type Options struct {
	Durability Durability
	// Create makes a new Store when none exists at the path.
	Create bool
	// ReadOnly opens without the right to write.
	ReadOnly bool
	// BusyTimeout bounds how long a writer waits for another writer's turn.
	// Zero means 30 s.
	BusyTimeout time.Duration
}

// Store is an open Store file. It is safe for concurrent use.
type Store struct {
	immutable    bool        // read-only, without a shared-memory file (open)
	opened       unix.Stat_t // the file when an immutable Store was opened
	readOnlyToUs bool        // read-only because the file is not ours to write
	path         string
	opts         Options
	w            *sql.DB // the one writer connection: BEGIN IMMEDIATE transactions
	r            *sql.DB // readers: never wait for the writer (WAL)
	codec        *codec
	meta         map[string]string
	stmts        readStmts
	raw          rawPool       // connections for GetManyInto
	ckpt         *checkpointer // nil when read-only
	wstmts       writeStmts
	trees        cache[*Tree]
	// treeLayouts says how large directories are cut, so a new version
	// encodes and stages only the nodes it does not share.
	treeLayouts cache[*treeLayout]
	treeNodes   cache[[]byte] // the nodes below large directories' roots
	extents     cache[[]byte] // extent nodes read or written lately
	commits     cache[*Commit]
	initTree    atomic.Value // object.ID of init's tree, once known
	// failAudit makes AppendBlame fail: a failure point for tests.
	failAudit atomic.Bool
	drops     leaseDrops // released, not yet written (DropLeaseSoon)
}

// Open opens the Store at path, creating it when opts.Create is set.
func Open(path string, opts Options) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	s, err := open(abs, opts)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return s, nil
}

// writableToUs reports whether we may write the Store at path: the file,
// and its shared-memory and WAL files, which SQLite makes beside it when
// they are missing (a writable file in a directory we may not write
// cannot be written: SQLite said only "attempt to write a readonly
// database", to every command, reads too).
func writableToUs(path string) bool {
	if unix.Access(path, unix.W_OK) != nil {
		return false
	}
	if unix.Access(filepath.Dir(path), unix.W_OK) == nil {
		return true
	}
	return unix.Access(path+"-shm", unix.W_OK) == nil && unix.Access(path+"-wal", unix.W_OK) == nil
}

func open(path string, opts Options) (*Store, error) {
	if opts.BusyTimeout == 0 {
		opts.BusyTimeout = 30 * time.Second
	}
	if err := checkPath(path, opts); err != nil {
		return nil, err
	}
	if opts.Create {
		// SQLite would say only "unable to open database file".
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			if err := unix.Access(filepath.Dir(path), unix.W_OK); err != nil {
				return nil, fmt.Errorf("%w: cannot create it in %s: %w", ErrReadOnly, filepath.Dir(path), err)
			}
		}
	}
	immutable, readOnlyToUs := false, false
	var opened unix.Stat_t
	if !opts.Create && !opts.ReadOnly && !writableToUs(path) {
		// Not ours to write (another user's Store, a read-only mount, a
		// directory we may not create its shared-memory and WAL files
		// in): read it, creating nothing — a shared-memory or WAL file
		// made by us would lock its owner out. With its shared-memory
		// file there, SQLite reads it, WAL and all, read-only. Without,
		// only as immutable, which sees nothing of a WAL: so only when
		// the WAL is empty, and as the snapshot it was when opened.
		opts.ReadOnly, readOnlyToUs = true, true
		if unix.Access(path+"-shm", unix.R_OK) != nil {
			if !emptyOrMissing(path + "-wal") {
				return nil, fmt.Errorf("%w: it is read-only to you and holds changes not yet checkpointed, which SQLite cannot read without writing; open it once as its owner", ErrReadOnly)
			}
			immutable = true
			if err := unix.Stat(path, &opened); err != nil {
				return nil, err
			}
		}
	}
	s := &Store{path: path, opts: opts, immutable: immutable, readOnlyToUs: readOnlyToUs, opened: opened}
	s.trees.max, s.commits.max, s.treeLayouts.max, s.treeNodes.max = treeCacheMax, commitCacheMax, treeCacheMax, treeNodeCacheMax
	s.extents.max = extentCacheMax
	var err error
	if s.codec, err = newCodec(); err != nil {
		return nil, err
	}
	if err := s.openDBs(); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.prepare(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// changedSinceOpen reports whether an immutable Store's file has changed
// since it was opened (or a WAL has appeared): what it reads is then a
// stale snapshot, and an object it misses may have moved, not gone.
func (s *Store) changedSinceOpen() bool {
	if !s.immutable {
		return false
	}
	var now unix.Stat_t
	if unix.Stat(s.path, &now) != nil || now.Size != s.opened.Size || now.Mtim != s.opened.Mtim {
		return true
	}
	return !emptyOrMissing(s.path + "-wal")
}

// ErrStoreChanged: a Store opened read-only as a snapshot changed since.
var ErrStoreChanged = errors.New("the Store changed since it was opened read-only (as a snapshot): open it again")

func emptyOrMissing(path string) bool {
	st, err := os.Stat(path)
	return err != nil || st.Size() == 0
}

func checkPath(path string, opts Options) error {
	if _, err := os.Stat(filepath.Dir(path)); errors.Is(err, fs.ErrNotExist) {
		if !opts.Create {
			return fmt.Errorf("%w: no Store at this path, nor its directory (create one with layerfs init)", ErrNotFound)
		}
		return fmt.Errorf("%w: the directory for the Store does not exist", ErrNotFound)
	}
	if err := CheckFilesystem(path); err != nil {
		return err
	}
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !opts.Create:
		return fmt.Errorf("%w: no Store at this path (create one with layerfs init)", ErrNotFound)
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case st.IsDir():
		return fmt.Errorf("%w: it is a directory", ErrNotStore)
	case st.Size() == 0 && !opts.Create && emptyOrMissing(path+"-wal"):
		// SQLite would make a Store of it: only init may. (A Store
		// whose first pages are all still in its WAL is one.)
		return fmt.Errorf("%w: it is an empty file (layerfs init makes a Store)", ErrNotStore)
	}
	return nil
}

func (s *Store) dsn(writer bool) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", s.opts.BusyTimeout.Milliseconds()))
	q.Add("_pragma", "mmap_size(1099511627776)")
	if !s.opts.ReadOnly { // setting them writes to the file
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous("+s.opts.Durability.pragma()+")")
	}
	if writer {
		// The writer's page cache holds only what commits write (reads
		// go through mmap): SQLite walks the whole cache at the end of
		// every write transaction, so a large one costs each commit
		// ~0.2 ms.
		q.Add("_pragma", fmt.Sprintf("cache_size(-%d)", writerCacheBytes>>10))
		// ... but a pack (8 MiB) must not spill out of it mid-transaction:
		// a spilled page written again is overwritten in the WAL, and the
		// commit then reads back every frame after it to rewrite their
		// checksums — ~25% of storing a 32 MiB file went there. Up to
		// cacheSpillPages stay in memory until the commit; SQLite keeps
		// them afterwards, so writePack hands them back (shrink_memory).
		q.Add("_pragma", fmt.Sprintf("cache_spill(%d)", cacheSpillPages))
		q.Set("_txlock", "immediate")
		q.Set("vfs", walVFSName)                  // gathers WAL writes (walvfs.go)
		q.Add("_pragma", "wal_autocheckpoint(0)") // see checkpointer
		q.Add("_pragma", fmt.Sprintf("journal_size_limit(%d)", walKeep))
	} else {
		q.Add("_pragma", "cache_size(-32768)")
		q.Add("_pragma", "query_only(1)")
	}
	if s.opts.ReadOnly {
		q.Set("mode", "ro") // creates nothing
		if s.immutable {
			q.Set("immutable", "1")
		}
	}
	return "file:" + uriPath.Replace(s.path) + "?" + q.Encode()
}

// uriPath escapes what a SQLite URI filename would read otherwise: '?'
// starts its query, '#' its fragment, and %HH is decoded (a Store at
// "proj#1.lfs" had been opened as "proj").
var uriPath = strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23")

// writerCacheBytes is the writer's page cache; cacheSpillPages is how
// many pages a write transaction keeps in memory before spilling to the
// WAL: 64 MiB of 4 KiB pages, several packs.
const (
	writerCacheBytes = 2 << 20
	cacheSpillPages  = 16384
)

func (s *Store) openDBs() error {
	var err error
	if !s.opts.ReadOnly {
		if err := registerWALVFS(); err != nil {
			return err
		}
		if s.w, err = sql.Open("sqlite", s.dsn(true)); err != nil {
			return err
		}
		s.w.SetMaxOpenConns(1)
		s.w.SetConnMaxIdleTime(0)
		if err := s.w.Ping(); err != nil {
			return describeOpenError(err)
		}
		if err := s.startCheckpointer(); err != nil {
			return err
		}
	}
	if s.r, err = sql.Open("sqlite", s.dsn(false)); err != nil {
		return err
	}
	n := readerConns()
	s.r.SetMaxOpenConns(n)
	s.r.SetMaxIdleConns(n)
	if err := s.r.Ping(); err != nil {
		return describeOpenError(err)
	}
	return nil
}

// readerConns is how many connections read at once: database/sql's
// readers, and GetManyInto's raw ones, each.
func readerConns() int { return 2*runtime.GOMAXPROCS(0) + 2 }

// describeOpenError turns SQLite's terse words about a file that is not a
// database into ErrNotStore.
func describeOpenError(err error) error {
	if strings.Contains(err.Error(), "file is not a database") {
		return fmt.Errorf("%w: %v", ErrNotStore, err)
	}
	return err
}

func (s *Store) prepare() error {
	ctx := context.Background()
	if s.w != nil {
		meta := map[string]string{"created": time.Now().UTC().Format(time.RFC3339)}
		for k, v := range formatMeta() {
			meta[k] = v
		}
		if err := prepareSchema(ctx, s.w, meta); err != nil {
			return describeOpenError(err)
		}
	}
	if err := s.loadMeta(ctx); err != nil {
		return describeOpenError(err)
	}
	if err := checkFormatMeta(s.meta); err != nil {
		return err
	}
	if err := s.prepareWriteStmts(); err != nil {
		return err
	}
	return s.prepareStmts()
}

func (s *Store) loadMeta(ctx context.Context) error {
	var version int
	if err := s.r.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return err
	}
	if version > FormatVersion {
		return fmt.Errorf("%w: the Store has format %d, this layerfs reads up to %d", ErrNewerFormat, version, FormatVersion)
	}
	if version == 0 {
		return fmt.Errorf("%w: no layerfs format version", ErrNotStore)
	}
	if version < FormatVersion {
		return fmt.Errorf("%w: the Store has format %d and must be migrated to %d: open it once without read-only",
			ErrUnsupported, version, FormatVersion)
	}
	rows, err := s.r.QueryContext(ctx, `SELECT key, value FROM meta`)
	if err != nil {
		return err
	}
	defer rows.Close()
	s.meta = map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return err
		}
		s.meta[k] = v
	}
	return rows.Err()
}

// Path is the Store file's absolute path.
func (s *Store) Path() string { return s.path }

// Meta returns a value recorded in the Store's meta table.
func (s *Store) Meta(key string) string { return s.meta[key] }

// Close closes the Store. Pending batches must be flushed first.
func (s *Store) Close() error {
	var errs []error
	ids := s.drops.take(true)
	s.drops.flushing.Wait()                  // a flush the timer began takes its drops itself,
	ids = append(ids, s.drops.take(true)...) // and puts them back if it failed
	if len(ids) > 0 {
		errs = append(errs, s.Update(func(tx *RefTx) error { return tx.writeLeaseDrops(ids) }))
	}
	c := s.ckpt
	s.ckpt = nil
	errs = append(errs, c.stop())
	s.stmts.close()
	s.wstmts.close()
	s.raw.close()
	if s.r != nil {
		errs = append(errs, s.r.Close())
	}
	if s.w != nil {
		errs = append(errs, s.w.Close())
	}
	return errors.Join(errs...)
}

// Writable reports, as ErrReadOnly, a Store opened read-only, by request
// or because its file is not the caller's to write.
func (s *Store) Writable() error { return s.writable() }

func (s *Store) writable() error {
	if s.w == nil && s.readOnlyToUs {
		return fmt.Errorf("%w: you may not write %s", ErrReadOnly, s.path)
	}
	if s.w == nil {
		return ErrReadOnly
	}
	return nil
}
