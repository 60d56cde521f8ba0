#!/usr/bin/env bash
# The SDK's file calls against their bars, as Go benchmarks (see
# commits_test.go, writeat_test.go, history_test.go):
#   Commits/s of small-file writes on a branch of Go's tree, 1, 2 and 8 processes
#   stored bytes of 16 writeAts and of a prepend in a 32 MiB file
#   diff of a one-file change and blame of a 1,000-line file, in ms
# The first run captures Go's tree into $BENCH_WORK/layerfs-bench-cache
# (default /var/tmp) and keeps it. COMMITS sets the writes per run.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
COMMITS=${COMMITS:-3000}
go test -run '^$' -bench 'Commits' -benchtime "${COMMITS}x" ./bench/
go test -run '^$' -bench 'BigFileEdits' -benchtime 1x -v ./bench/ | grep -v '^=== RUN'
go test -run '^$' -bench 'DiffOneFile|Blame1000Lines' -v ./bench/ | grep -v '^=== RUN'
