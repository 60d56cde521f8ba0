#!/usr/bin/env bash
# layerfs init against `git add -A && git commit` of the same tree, in one
# run, and the Store's size against the same tree's git repository after
# `git gc --aggressive`. Prints medians and ratios.
. "$(dirname "$0")/lib.sh"
RUNS=${RUNS:-3}

copy_tree "$WORK/src"
tar cf /dev/null -C "$WORK/src" . # warm the page cache for both sides
files=$(find "$WORK/src" -type f | wc -l)
say "tree: $files files, $(du -sb "$WORK/src" | cut -f1) bytes ($SRC_TREE)"

git_once() {
	rm -rf "$WORK/git"
	local t; t=$(now)
	git --git-dir="$WORK/git" --work-tree="$WORK/src" init -q
	git --git-dir="$WORK/git" --work-tree="$WORK/src" add -A -f
	git --git-dir="$WORK/git" --work-tree="$WORK/src" -c gc.auto=0 -c user.name=b -c user.email=b@b commit -q -m init
	elapsed "$t"
}
layerfs_once() {
	rm -f "$WORK/s.layerfs"*
	local t; t=$(now)
	"$LAYERFS" init --quiet --store "$WORK/s.layerfs" "$WORK/src"
	elapsed "$t"
}
: >"$WORK/git.times"; : >"$WORK/lfs.times"
for i in $(seq "$RUNS"); do
	git_once >>"$WORK/git.times"
	layerfs_once >>"$WORK/lfs.times"
done
g=$(median <"$WORK/git.times"); l=$(median <"$WORK/lfs.times")
say "init: layerfs $l s, git add -A && git commit $g s (medians of $RUNS); git/layerfs = $(ratio "$g" "$l")x"

git --git-dir="$WORK/git" gc -q --aggressive
gitsize=$(du -sb "$WORK/git/objects" | cut -f1)
"$LAYERFS" stats --store "$WORK/s.layerfs" --json >"$WORK/stats.json"
stored=$(grep '"stored_bytes"' "$WORK/stats.json" | tr -dc 0-9)
filebytes=$(grep '"file_bytes"' "$WORK/stats.json" | tr -dc 0-9)
say "size: git objects after gc --aggressive $gitsize B; layerfs stored $stored B ($(ratio "$stored" "$gitsize")x), Store file $filebytes B ($(ratio "$filebytes" "$gitsize")x)"
