#!/usr/bin/env bash
# The LayerFS demo (make demo): capture a real tree, give four agents a
# Workspace each on main, let them work in parallel, commit through the
# gate (one conflict, fixed and re-committed), then show log, diff, blame
# and stats. Needs root, /dev/fuse and overlayfs. Cleans up after itself.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export PATH="/usr/local/go/bin:$PATH"
L="$ROOT/bin/layerfs"
[ -x "$L" ] || (cd "$ROOT" && go build -o bin/ ./cmd/...)
WORK=$(mktemp -d "${DEMO_WORK:-/var/tmp}/layerfs-demo.XXXXXX")
export LAYERFS_STORE="$WORK/project.layerfs" LAYERFS_SOCKET="$WORK/daemon.sock"
DAEMON=
cleanup() {
	[ -n "$DAEMON" ] && kill -TERM "$DAEMON" 2>/dev/null && wait "$DAEMON" 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "capture Go's source tree ($(go env GOROOT)) into one Store file"
cp -a "$(go env GOROOT)" "$WORK/src"
printf '# Demo\nline 2\nline 3\nline 4\n' >"$WORK/src/NOTES.md"
"$L" init "$WORK/src"

step "start the daemon (FUSE mount of the Store + Workspaces over overlayfs)"
"$L" daemon --state-dir "$WORK/state" 2>"$WORK/daemon.log" &
DAEMON=$!
for _ in $(seq 100); do [ -S "$LAYERFS_SOCKET" ] && break; sleep 0.05; done

step "four Workspaces of main, each in milliseconds"
ids=()
for i in 1 2 3 4; do
	start=$(date +%s%N)
	ids+=("$("$L" ws create)")
	echo "${ids[-1]} in $((($(date +%s%N) - start) / 1000000)) ms (including the CLI's own start)"
done

step "run a command in each, in parallel"
jobs=()
"$L" ws exec "${ids[0]}" -- sh -c 'echo "// touched by agent 1" >> src/fmt/print.go' & jobs+=($!)
"$L" ws exec "${ids[1]}" -- sh -c 'sed -i "s/^line 4$/line 4, agent 2/" NOTES.md' & jobs+=($!)
"$L" ws exec "${ids[2]}" -- sh -c 'sed -i "s/^line 2$/line 2, agent 3/" NOTES.md' & jobs+=($!)
"$L" ws exec "${ids[3]}" -- sh -c 'sed -i "s/^line 2$/line 2, agent 4/" NOTES.md' & jobs+=($!)
wait "${jobs[@]}" # not the daemon's

step "commit each through the gate"
for id in "${ids[@]}"; do "$L" ws commit "$id" --message "work of $id" || true; done

step "agent 4 met a conflict: its NOTES.md holds markers"
"$L" ws exec "${ids[3]}" -- cat NOTES.md
"$L" ws exec "${ids[3]}" -- sh -c 'printf "# Demo\nline 2, agents 3 and 4\nline 3\nline 4, agent 2\n" > NOTES.md'
"$L" ws commit "${ids[3]}" --message "agent 4 resolves"

step "log"
"$L" log main -n 6
step "diff L1 main --stat"
"$L" diff L1 main --stat
step "blame main:NOTES.md"
"$L" blame main:NOTES.md
step "stats"
"$L" stats

for id in "${ids[@]}"; do "$L" ws end "$id"; done
step "done: Workspaces ended, daemon stopping (it unmounts everything)"
