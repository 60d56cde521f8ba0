#!/usr/bin/env bash
# 100 forks of main: how much they add to the Store, and the dedupe ratio.
. "$(dirname "$0")/lib.sh"
N=${FORKS:-100}
copy_tree "$WORK/src"
S="$WORK/s.layerfs"
"$LAYERFS" init --quiet --store "$S" "$WORK/src"
stat_of() { "$LAYERFS" stats --store "$S" --json | grep "\"$1\"" | tr -dc '0-9.'; }
before=$(stat_of file_bytes); stored0=$(stat_of stored_bytes)
t=$(now)
for i in $(seq "$N"); do "$LAYERFS" branch fork --store "$S" "fork-$i" main >/dev/null; done
dt=$(elapsed "$t")
after=$(stat_of file_bytes); stored1=$(stat_of stored_bytes)
say "$N forks in $dt s: Store file +$((after - before)) B, stored objects +$((stored1 - stored0)) B; dedupe $(stat_of dedupe)"
