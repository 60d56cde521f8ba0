#!/usr/bin/env bash
# Runs every benchmark of bench/ — the Go benchmarks through the scripts
# that drive them, and the scripts comparing whole commands — and writes
# what they print to bench/out/report-DATE.txt (bench/out/report.txt is
# the latest). `make bench` runs it.
#
# PARTS picks a subset, e.g. PARTS="workspace sdk_calls". Each part's
# variables (RUNS, COMMITS, BUILD_RUNS, BENCH_TREE, BENCH_WORK) pass
# through. A part that fails is reported and the others still run; the
# exit status says whether any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
PARTS=${PARTS:-"workspace sdk_calls init_vs_git forks mount roundtrip"}
mkdir -p bench/out
REPORT="bench/out/report-$(date +%Y%m%d-%H%M%S).txt"
ln -sfn "$(basename "$REPORT")" bench/out/report.txt

{
	echo "# LayerFS benchmarks, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
	echo "# $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r), $(go version | cut -d' ' -f3)"
	echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$REPORT"

failed=()
for part in $PARTS; do
	script="bench/$part.sh"
	if [ ! -x "$script" ]; then
		echo "run.sh: no $script" | tee -a "$REPORT" >&2
		failed+=("$part")
		continue
	fi
	printf '\n#### %s\n' "$part" | tee -a "$REPORT"
	start=$(date +%s)
	if ! "$script" 2>&1 | tee -a "$REPORT"; then
		failed+=("$part")
	fi
	echo "# $part took $(($(date +%s) - start)) s" | tee -a "$REPORT"
done

echo | tee -a "$REPORT"
if [ ${#failed[@]} -gt 0 ]; then
	echo "# failed: ${failed[*]}" | tee -a "$REPORT"
	echo "report: $REPORT"
	exit 1
fi
echo "# all parts ran" | tee -a "$REPORT"
echo "report: $REPORT"
