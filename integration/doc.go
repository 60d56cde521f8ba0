// Package integration holds LayerFS's end-to-end tests: real FUSE mounts,
// kernel overlayfs, the daemon and the CLI binary, run as root.
//
// TestMain skips the whole suite unless the process is root with /dev/fuse
// and overlayfs available; with LAYERFS_REQUIRE_ROOT=1 (as CI sets it) it
// fails instead of skipping. Every mount a test makes is unmounted in
// t.Cleanup, and the suite fails if a LayerFS or overlay mount is left
// behind.
package integration
