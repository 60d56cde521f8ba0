package fusefs

import (
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// ServeUntilSignal serves until the mount is unmounted from outside or the
// process gets SIGINT, SIGTERM or SIGHUP (its terminal closed) — one it
// was not started ignoring — which unmount it (lazily when it is in use).
// A second signal stops waiting: the mount is detached and the call
// returns at once.
func (s *Server) ServeUntilSignal() error {
	sigs := notifySignals()
	defer signal.Stop(sigs)
	return s.serveUntil(sigs)
}

// notifySignals starts catching SIGINT, SIGTERM and SIGHUP. A server
// calls it before mounting, so a signal that comes as soon as the mount
// is visible still unmounts it. Uncaught, SIGHUP — a foreground server's
// terminal closing — killed the server and left its mount stale.
//
// A signal this process was started with ignored stays ignored, as
// libfuse leaves it: nohup's SIGHUP, or the SIGINT a shell script's
// background job ignores. Caught from here on, it was ignored only until
// now, which made its effect depend on how soon after the start it came.
func notifySignals() chan os.Signal {
	sigs := make(chan os.Signal, 2)
	for _, sig := range []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		if !signal.Ignored(sig) {
			signal.Notify(sigs, sig)
		}
	}
	return sigs
}

func (s *Server) serveUntil(sigs <-chan os.Signal) error {
	s.log.Printf("serving %s", s.mnt) // the mount is ready: go-fuse's own first requests are done
	select {
	case <-s.done:
		return nil
	case sig := <-sigs:
		s.log.Printf("%s: unmounting %s", sig, s.mnt)
	}
	unmounted := make(chan error, 1)
	go func() { unmounted <- s.Unmount() }()
	select {
	case err := <-unmounted:
		return err
	case sig := <-sigs:
		s.log.Printf("%s again: detaching %s without waiting", sig, s.mnt)
		unix.Unmount(s.mnt, unix.MNT_DETACH)
		return nil
	}
}
