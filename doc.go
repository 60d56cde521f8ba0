// Package layerfs is the LayerFS Go SDK: open a Store, capture a project into
// it, and read, fork and export its history — all in the caller's process,
// straight against the Store file. No daemon is needed for anything here;
// only Workspaces (kernel overlay mounts) go through the daemon.
//
// The heavy lifting lives in the packages below: store (SQLite, objects,
// refs), extents (file contents as trees of chunks). This package strings
// them together into the operations a user names: init, export, fork, log.
package layerfs
