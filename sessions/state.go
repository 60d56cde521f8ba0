package sessions

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/layerfs/layerfs/object"
)

// record is what the daemon keeps on disk about a Workspace, so a restart
// after a crash brings it back with its uncommitted changes.
type record struct {
	ID      string    `json:"id"`
	Branch  string    `json:"branch"`
	Lease   string    `json:"lease"` // hex commit id
	Path    string    `json:"path"`  // inside the exec namespace
	Gen     int       `json:"gen"`   // names the current upper and work dirs
	Created time.Time `json:"created"`
	Commits int       `json:"commits"`
	// Unsettled lists the paths a conflict left holding this Workspace's
	// version without marker blocks (see unsettled.go).
	Unsettled []unsettledPath `json:"unsettled,omitempty"`
}

func (r *record) lease() object.ID {
	id, _ := object.Parse(r.Lease)
	return id
}

// save writes the record atomically: a crash leaves the old or the new
// one. On a full disk, where no new file can be written, it overwrites
// the old record in place instead (see overwriteRecord): a record not
// saved after a commit landed would take the Workspace back to its old
// lease at the next start.
func (r *record) save(dir string) error {
	data, err := jsonRecord(r)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "state.json.tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		os.Remove(tmp)
		if errors.Is(err, syscall.ENOSPC) && overwriteRecord(filepath.Join(dir, "state.json"), data) == nil {
			return nil
		}
		return fmt.Errorf("save workspace %s: %w", r.ID, err)
	}
	return os.Rename(tmp, filepath.Join(dir, "state.json"))
}

func jsonRecord(r *record) ([]byte, error) { return json.MarshalIndent(r, "", "  ") }

// overwriteRecord writes data over the file at p, which exists, in the
// blocks it has: padded with spaces (which JSON ignores) to the old size
// if shorter, so that nothing of the old record is left after it, and no
// truncate is needed. A record longer than the blocks the file has is
// refused (ENOSPC) before anything is written: a write that needs a new
// block on a full disk would stop partway, leaving neither record.
func overwriteRecord(p string, data []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || int64(len(data)) > sys.Blocks*512 {
		return syscall.ENOSPC
	}
	if pad := st.Size() - int64(len(data)); pad > 0 {
		data = append(data, bytes.Repeat([]byte(" "), int(pad))...)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		return err
	}
	return f.Sync()
}

func loadRecord(dir string) (*record, error) {
	data, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return nil, err
	}
	r := &record{}
	if err := json.Unmarshal(data, r); err != nil {
		return nil, fmt.Errorf("workspace record %s: %w", dir, err)
	}
	if _, err := object.Parse(r.Lease); err != nil || r.ID == "" || r.Branch == "" {
		return nil, fmt.Errorf("workspace record %s: incomplete", dir)
	}
	return r, nil
}

// endedMarker is what an ended Workspace's record becomes while its
// directory waits for removal.
const endedMarker = "ended"

func isEnded(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, endedMarker))
	return err == nil
}
