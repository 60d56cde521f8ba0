package sessions

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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

// save writes the record atomically: a crash leaves the old or the new one.
func (r *record) save(dir string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "state.json.tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("save workspace %s: %w", r.ID, err)
	}
	return os.Rename(tmp, filepath.Join(dir, "state.json"))
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
