# Shared helpers for bench scripts. Source it; it sets LAYERFS, WORK, TREE.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PATH="/usr/local/go/bin:$PATH"
LAYERFS="$ROOT/bin/layerfs"
[ -x "$LAYERFS" ] || (cd "$ROOT" && go build -o bin/ ./cmd/...)
# WORK: scratch space on the local disk (not tmpfs), removed at exit.
WORK=$(mktemp -d "${BENCH_WORK:-/var/tmp}/layerfs-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
# TREE: the tree to measure; default a private copy of Go's own tree.
SRC_TREE=${BENCH_TREE:-$(go env GOROOT)}

now() { date +%s.%N; }
elapsed() { echo "$(now) - $1" | bc; }
ratio() { echo "scale=2; $1 / $2" | bc; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
say() { printf '%s\n' "$*" | tee -a "${REPORT:-/dev/null}"; }

# copy_tree DST: a private copy of the source tree, same metadata.
copy_tree() { cp -a "$SRC_TREE" "$1"; }
