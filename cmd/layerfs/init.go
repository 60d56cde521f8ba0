package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/layerfs/layerfs"
	"github.com/layerfs/layerfs/store"
)

var initFlags struct {
	message  string
	quiet    bool
	progress bool
}

func init() {
	register(&command{
		name:    "init",
		args:    "DIR",
		summary: "capture a directory as main's first Layer",
		help: `Creates the Store (if needed) and captures DIR completely: sources, .git,
node_modules, every ignored file, symlinks (stored, never followed), empty
directories, modes, owners and mtimes. Hard links become separate files;
fifos, sockets and device files are skipped and listed. A progress bar is
shown when stderr is a terminal.`,
		flags: func(c *cli) {
			c.fs.StringVar(&initFlags.message, "message", "", "commit message (default \"init DIR\")")
			c.fs.BoolVar(&initFlags.quiet, "quiet", false, "print nothing but errors")
			c.fs.BoolVar(&initFlags.progress, "progress", false, "show progress even when stderr is not a terminal")
			c.jsonFlag()
		},
		run: runInit,
	})
}

func runInit(c *cli, args []string) error {
	if err := c.want(args, 1, 1); err != nil {
		return err
	}
	if fi, err := os.Stat(args[0]); err != nil {
		return fmt.Errorf("directory %s: %w", args[0], errNotFound(err))
	} else if !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory", errUsage, args[0])
	}
	_, statErr := os.Lstat(c.storePath)
	made := errors.Is(statErr, os.ErrNotExist) // by this init: removed if it fails
	st, err := c.open(true)
	if err != nil {
		return err
	}
	opts := layerfs.InitOptions{Message: initFlags.message}
	if !initFlags.quiet && !c.json && (initFlags.progress || isTerminal(os.Stderr)) {
		opts.Progress = progressBar
	}
	res, err := st.Init(args[0], opts)
	if err != nil {
		if made && !initializedMeanwhile(st) {
			st.Close()
			c.st = nil
			for _, suffix := range []string{"", "-wal", "-shm"} {
				os.Remove(c.storePath + suffix)
			}
		}
		return err
	}
	for _, p := range res.Excluded {
		fmt.Fprintf(c.errOut, "layerfs init: left out %s: it is the Store's own file\n", p)
	}
	if c.json {
		return c.printJSON(initJSON{Commit: res.Commit.String(), Layer: res.Layer, Files: res.Files, Dirs: res.Dirs,
			Symlinks: res.Symlinks, Bytes: res.Bytes, Skipped: nonNil(res.Skipped), Excluded: nonNil(res.Excluded),
			Objects: objectsJSON{New: res.Objects.New, Reused: res.Objects.Reused, RawBytes: res.Objects.RawBytes,
				StoredBytes: res.Objects.StoredBytes, Packs: res.Objects.Packs},
			DurationMS: ms(res.Duration)})
	}
	if !initFlags.quiet {
		fmt.Fprintf(c.out, "main %s (%s): %d files, %d dirs, %d symlinks, %s in %s\n",
			res.Commit.Short(), res.Layer, res.Files, res.Dirs, res.Symlinks, humanBytes(res.Bytes), res.Duration.Round(time.Millisecond))
		fmt.Fprintf(c.out, "objects: %d new, %d reused; %s stored\n", res.Objects.New, res.Objects.Reused, humanBytes(res.Objects.StoredBytes))
	}
	for _, p := range res.Skipped {
		fmt.Fprintf(c.errOut, "layerfs init: warning: skipped %s (fifo, socket or device)\n", p)
	}
	return nil
}

// initializedMeanwhile reports whether the Store this init made and failed
// in has a main branch all the same: another init, started at the same
// moment, found the new file and landed first. The Store is that init's
// then, and stays.
func initializedMeanwhile(st *layerfs.Store) bool {
	_, err := st.Backend().Branch(store.MainBranch)
	return err == nil
}

// initJSON is init's result for --json.
type initJSON struct {
	Commit     string      `json:"commit"`
	Layer      string      `json:"layer"`
	Files      int         `json:"files"`
	Dirs       int         `json:"dirs"`
	Symlinks   int         `json:"symlinks"`
	Bytes      int64       `json:"bytes"`
	Skipped    []string    `json:"skipped"`  // fifos, sockets, devices
	Excluded   []string    `json:"excluded"` // the Store's own files
	Objects    objectsJSON `json:"objects"`
	DurationMS float64     `json:"duration_ms"`
}

type objectsJSON struct {
	New         int   `json:"new"`
	Reused      int   `json:"reused"`
	RawBytes    int64 `json:"raw_bytes"`
	StoredBytes int64 `json:"stored_bytes"`
	Packs       int   `json:"packs"`
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// nonNil is s, or an empty list for JSON's [] rather than null.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func progressBar(p layerfs.Progress) {
	const width = 30
	frac := 1.0
	if p.TotalBytes > 0 {
		frac = float64(p.Bytes) / float64(p.TotalBytes)
	}
	filled := int(frac * width)
	bar := make([]byte, width)
	for i := range bar {
		bar[i] = ' '
		if i < filled {
			bar[i] = '='
		}
	}
	rate := float64(p.Bytes) / p.Elapsed.Seconds()
	eta := "--"
	if rate > 0 && !p.Done {
		eta = (time.Duration(float64(p.TotalBytes-p.Bytes)/rate) * time.Second).Round(time.Second).String()
	}
	fmt.Fprintf(os.Stderr, "\r[%s] %d/%d files  %s/%s  %s/s  ETA %s   ",
		bar, p.Files, p.TotalFiles, humanBytes(p.Bytes), humanBytes(p.TotalBytes), humanBytes(int64(rate)), eta)
	if p.Done {
		fmt.Fprintln(os.Stderr)
	}
}
