// Package bench measures LayerFS against its anchors — cp -a, git, plain
// ext4, overlayfs, go-fuse's loopback — in the same run, and reports
// medians and ratios. Nothing imports it. Go benchmarks live in its tests
// (go test -bench . ./bench/); the shell scripts beside them compare whole
// commands (run.sh runs them all).
package bench
