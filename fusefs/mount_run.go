package fusefs

import (
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// Request is one mount command, as layerfs mount and mount.fuse.layerfs
// read it from their arguments.
type Request struct {
	StorePath string
	// Ref names what to mount: a branch (pinned to its head now), a layer
	// or a commit. Empty with Options.AllCommits.
	Ref        string
	Mountpoint string
	Options    Options
	// Foreground serves in this process instead of a background server.
	Foreground bool
	// Args restart this executable as the background server; nil means
	// os.Args[1:].
	Args []string
	// Stderr is where a foreground server logs when Options.Log is unset;
	// nil means os.Stderr.
	Stderr io.Writer
}

// Run carries out a mount command. In the foreground it mounts, moves to
// the root directory, serves until an unmount or a signal (see
// ServeUntilSignal) and returns after unmounting. Otherwise it checks the
// Store and the ref, starts this executable again with the same arguments
// as a background server, and returns once that server's mount is ready,
// or with what stopped it: a SIGINT, SIGTERM or SIGHUP before then stops
// the server too, which unmounts what it mounted, and Run returns an
// *InterruptedError.
func Run(req Request) error {
	// Signals are caught first: whenever one comes, what this command
	// mounted is unmounted, or nothing is mounted at all.
	sigs := notifySignals()
	ready, pinned := backgroundChild()
	if ready == nil && !req.Foreground {
		err := req.startBackground(sigs)
		if err != nil {
			signal.Stop(sigs)
		}
		// Else the server's mount is ready and this command has done its
		// work: signals stay caught, unread, until it exits, so that one
		// coming meanwhile does not kill a command that succeeded (with
		// the mount in place).
		return err
	}
	defer signal.Stop(sigs)
	srv, closeAll, err := req.mount(pinned)
	if err == nil {
		// What the request names by relative paths is open or made
		// absolute by now. A server that kept its caller's working
		// directory would keep that filesystem busy — another mount,
		// say — for as long as it serves.
		os.Chdir("/")
	}
	notifyReady(ready, err)
	if err != nil {
		return err
	}
	defer closeAll()
	return srv.serveUntil(sigs)
}

// mount opens the Store and the log and mounts. closeAll releases them
// once the server is done.
func (req Request) mount(pinned object.ID) (*Server, func(), error) {
	logger, closeLog, err := req.logger()
	if err != nil {
		return nil, nil, err
	}
	st, err := store.Open(req.StorePath, store.Options{ReadOnly: true})
	if err != nil {
		closeLog()
		return nil, nil, err
	}
	closeAll := func() { st.Close(); closeLog() }
	commit := pinned
	if commit.IsZero() {
		commit, err = req.resolve(st)
	}
	var srv *Server
	if err == nil {
		srv, err = Mount(Config{Store: st, Commit: commit, Mountpoint: req.Mountpoint,
			Source: req.source(), Options: req.Options, Logger: logger})
	}
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	return srv, closeAll, nil
}

// resolve finds the Commit a single-ref mount shows; zero for all-commits.
func (req Request) resolve(st *store.Store) (object.ID, error) {
	if req.Options.AllCommits {
		return object.Zero, nil
	}
	r, err := st.Resolve(req.Ref)
	if err != nil {
		return object.Zero, fmt.Errorf("mount %s: %w", req.Ref, err)
	}
	return r.Commit, nil
}

// pin checks the Store and resolves the ref, before a background server is
// started, so errors reach the caller with their kind intact.
func (req Request) pin() (object.ID, error) {
	st, err := store.Open(req.StorePath, store.Options{ReadOnly: true})
	if err != nil {
		return object.Zero, err
	}
	defer st.Close()
	return req.resolve(st)
}

// source is what /proc/mounts shows as the mount's source.
func (req Request) source() string {
	p, err := filepath.Abs(req.StorePath)
	if err != nil {
		p = req.StorePath
	}
	if req.Options.AllCommits {
		return p
	}
	return p + "#" + req.Ref
}

// logger logs to Options.Log, or else to Stderr.
func (req Request) logger() (*log.Logger, func(), error) {
	if req.Options.Log == "" {
		w := req.Stderr
		if w == nil {
			w = os.Stderr
		}
		return log.New(w, "layerfs: ", log.LstdFlags), func() {}, nil
	}
	f, err := os.OpenFile(req.Options.Log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("open log: %w", err)
	}
	return log.New(f, "layerfs: ", log.LstdFlags), func() { f.Close() }, nil
}
