package main

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/layerfs/layerfs/store"
)

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// errNotFound maps a missing file to store.ErrNotFound, so the message and
// the exit code say "not found".
func errNotFound(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return store.ErrNotFound
	}
	return err
}
