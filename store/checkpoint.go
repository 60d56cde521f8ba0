package store

import (
	"context"
	"database/sql"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Checkpoints — copying the WAL's pages into the database file, which
// SQLite's own automatic checkpoint does inside the commit that takes the
// WAL past 1000 pages, and in NORMAL durability with two fsyncs — run
// off the writers' path. A commit that stores a 32 MiB file spent ~400 ms
// of its time there, and a small commit now and then paid for the
// commits before it. The writer connection turns the automatic checkpoint
// off (wal_autocheckpoint(0)); every write transaction tells the
// checkpointer how much it wrote, and once that passes checkpointBytes,
// or checkpointDelay after a smaller write, the checkpointer runs a
// PASSIVE checkpoint on a connection of its own at background priority:
// it never waits for readers or writers, and they never wait for it.
// A Store that closes owing a checkpoint runs it then (see stop).
//
// A PASSIVE checkpoint copies the WAL into the database but never
// restarts it: a writer does that, at the start of its transaction, only
// if every frame has been copied. Under a sustained write load new frames
// always arrive while a checkpoint syncs, so the WAL grew without end
// (80 KB a commit: 240 MB after 3,000 small commits). Once it passes
// walMax, the checkpointer runs a RESTART checkpoint instead, which makes
// writers wait while it copies the rest and syncs (30-190 ms on this
// machine's disk) and lets the next writer start the WAL over; the writer
// connection's journal_size_limit (walKeep) then trims the file.
//
// A large write — a pack of a big file's chunks — comes in a run: a
// commit of a new 32 MiB file writes sixteen 2 MiB packs back to back
// while its capture goes on (see stageSpill). A checkpoint started after
// the first of them copies it while the rest are still being written,
// and on two cores takes about a third of the CPU the commit is waiting
// for (~35 ms of its 290). So once a large write has come, the
// checkpointer waits until the run ends — the publish of the Stage that
// spilled the packs (runEnded) — or until writes have paused for
// checkpointQuiet, or checkpointMaxOwed is owed; small commits alone
// never make it wait. Once the run ends, the checkpointer waits only
// checkpointSettle, for what the commit does after its publish. Waiting
// for the pause alone started the copy of a 32 MiB commit's packs 100 ms
// after it landed, where an agent's next command and commit, coming
// sooner, shared the two cores with it.
const (
	checkpointBytes = 4 << 20
	checkpointDelay = time.Second
	checkpointQuiet = 100 * time.Millisecond
	// checkpointSettle is how long the checkpointer waits after a run of
	// large writes ends: a Workspace's commit, once published, switches
	// to the new head and records blame (2–10 ms here), and a checkpoint
	// beside that made it 3–5× slower. In 7 interleaved pairs of 24 cold
	// creates of 32 MiB, 15 ms against none: 2–12 ms faster lifecycles.
	checkpointSettle  = 15 * time.Millisecond
	checkpointMaxOwed = 64 << 20
	// largeWrite is a write the checkpointer waits to see the end of:
	// below a Stage's spill (stageSpill), so that every spill counts.
	largeWrite = stageSpill / 2
	walMax     = 256 << 20
	walKeep    = 64 << 20
	// writeOverhead is what a write transaction is counted for besides
	// the objects it stores: index and ref pages.
	writeOverhead = 16 << 10
	// checkpointNice is the checkpointer's priority: that of the daemon's
	// other background work (sessions.backgroundNice).
	checkpointNice = 10
)

type checkpointer struct {
	db     *sql.DB
	wal    string // the WAL file's path
	walMax int64  // walMax; lower in tests
	mu     sync.Mutex
	owed   int64     // bytes written since the last checkpoint
	large  time.Time // when the last large write committed, or its run ended
	// quiet is how long writes must pause after large before a
	// checkpoint: checkpointQuiet, or checkpointSettle once the run ended.
	quiet time.Duration
	// armed says the checkpointer's timer is set: a small write that
	// leaves owed under checkpointBytes then need not wake it. (Waking a
	// parked thread is a system call here, and on a machine whose idle
	// cores halt, a core's wake-up; it was done on every commit.) Only
	// run changes it.
	armed atomic.Bool
	wake  chan struct{}
	quit  chan struct{}
	done  chan struct{}
}

// startCheckpointer opens the checkpointer's connection and starts it.
func (s *Store) startCheckpointer() error {
	db, err := sql.Open("sqlite", s.dsn(true))
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1)
	db.SetConnMaxIdleTime(0)
	if err := db.Ping(); err != nil { // now, so its files are open from the start
		db.Close()
		return err
	}
	c := &checkpointer{db: db, wal: s.path + "-wal", walMax: walMax,
		wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	s.ckpt = c
	go c.run()
	return nil
}

// wrote records that a write transaction committed about n bytes.
func (c *checkpointer) wrote(n int64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.owed += n + writeOverhead
	large := n >= largeWrite
	if large {
		c.large, c.quiet = time.Now(), checkpointQuiet
	}
	wake := large || !c.armed.Load() || c.owed >= checkpointBytes
	c.mu.Unlock()
	if wake {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// runEnded says the run of large writes, if one is under way, is over:
// the checkpoint waits checkpointSettle, not for writes to pause.
func (c *checkpointer) runEnded() {
	if c == nil {
		return
	}
	c.mu.Lock()
	// A run is under way while its last large write is within its quiet.
	ended := c.quiet == checkpointQuiet && time.Since(c.large) < checkpointQuiet
	if ended {
		c.large, c.quiet = time.Now(), checkpointSettle
	}
	c.mu.Unlock()
	if ended {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

func (c *checkpointer) run() {
	defer close(c.done)
	runtime.LockOSThread() // never unlocked: the thread keeps its priority
	unix.Setpriority(unix.PRIO_PROCESS, 0, checkpointNice)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	// The timer runs checkpointDelay after the first small write, or
	// until writes pause after a large one.
	arm := func(d time.Duration) {
		if c.armed.Load() {
			timer.Stop()
		}
		timer.Reset(d)
		c.armed.Store(true)
	}
	for {
		select {
		case <-c.quit:
			return
		case <-c.wake:
			owed, wait := c.due()
			switch {
			case owed < checkpointBytes:
				if !c.armed.Load() {
					arm(checkpointDelay)
				}
				continue
			case wait > 0:
				arm(wait)
				continue
			}
			if c.armed.Load() {
				timer.Stop()
				c.armed.Store(false)
			}
		case <-timer.C:
			c.armed.Store(false)
			if _, wait := c.due(); wait > 0 {
				arm(wait)
				continue
			}
		}
		c.checkpoint()
	}
}

// due returns how many bytes are owed, and how long to wait still for
// writes to pause after a large one.
func (c *checkpointer) due() (int64, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	wait := c.quiet - time.Since(c.large)
	if c.owed >= checkpointMaxOwed || wait < 0 {
		wait = 0
	}
	return c.owed, wait
}

func (c *checkpointer) checkpoint() {
	c.mu.Lock()
	c.owed = 0
	c.mu.Unlock()
	// A failure (SQLITE_BUSY from another process's checkpoint) is left
	// for the next one.
	mode := "PASSIVE"
	if fi, err := os.Stat(c.wal); err == nil && fi.Size() >= c.walMax {
		// Writers wait for this one: it runs at their priority (where
		// the process may raise it back).
		mode = "RESTART"
		unix.Setpriority(unix.PRIO_PROCESS, 0, 0)
		defer unix.Setpriority(unix.PRIO_PROCESS, 0, checkpointNice)
	}
	c.db.ExecContext(context.Background(), "PRAGMA wal_checkpoint("+mode+")")
}

// stop ends the checkpointer and closes its connection, checkpointing
// first what is still owed. SQLite's last connection to close would do
// that, but another process's may stay open — a mount's, for hours — and
// short-lived writers beside it, each gone before its checkpointDelay,
// then grew the WAL without end.
func (c *checkpointer) stop() error {
	if c == nil {
		return nil
	}
	close(c.quit)
	<-c.done
	if owed, _ := c.due(); owed > 0 {
		// PASSIVE, and on the caller's thread at its own priority:
		// closing waits for no reader.
		c.db.ExecContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)")
	}
	return c.db.Close()
}
