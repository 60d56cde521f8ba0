package sessions

import (
	"fmt"
	"io"
	"sync/atomic"
)

// metrics counts what the daemon did, for GET /metrics.
type metrics struct {
	created, fromSpare, ended, execs, lookedUpAhead, commits, upToDate, conflicts, discards atomic.Int64
}

// WriteMetrics writes the daemon's counters in Prometheus text format.
func (d *Daemon) WriteMetrics(w io.Writer) {
	h := d.Health()
	m := &d.metrics
	var dataFiles, dataBytes int64
	if d.data != nil {
		n, b := d.data.stats()
		dataFiles, dataBytes = int64(n), b
	}
	for _, c := range []struct {
		name, help, kind string
		v                int64
	}{
		{"layerfs_workspaces", "live Workspaces", "gauge", int64(h.Workspaces)},
		{"layerfs_workspaces_max", "cap on live Workspaces", "gauge", int64(h.Max)},
		{"layerfs_workspaces_unrestored", "Workspaces the daemon could not bring back at its start (GET /health lists them)", "gauge", int64(len(h.Unrestored))},
		{"layerfs_workspaces_created_total", "Workspaces created", "counter", m.created.Load()},
		{"layerfs_workspaces_from_spare_total", "of those, made ahead of need (a fast create)", "counter", m.fromSpare.Load()},
		{"layerfs_workspaces_ended_total", "Workspaces ended", "counter", m.ended.Load()},
		{"layerfs_execs_total", "commands run", "counter", m.execs.Load()},
		{"layerfs_lookups_ahead_total", "big files a commit changed, looked up in a view as its first command started", "counter", m.lookedUpAhead.Load()},
		{"layerfs_commits_total", "Workspace commits that landed", "counter", m.commits.Load()},
		{"layerfs_commits_up_to_date_total", "Workspace commits with nothing to land", "counter", m.upToDate.Load()},
		{"layerfs_commits_conflict_total", "Workspace commits refused as conflicts", "counter", m.conflicts.Load()},
		{"layerfs_discards_total", "uncommitted changes discarded", "counter", m.discards.Load()},
		{"layerfs_data_files", "big files kept for Workspaces to clone (0: no volume that clones)", "gauge", dataFiles},
		{"layerfs_data_bytes", "their size, before sharing blocks", "gauge", dataBytes},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s %d\n", c.name, c.help, c.name, c.kind, c.name, c.v)
	}
}
