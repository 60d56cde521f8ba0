#!/usr/bin/env bash
# Round trip: init a copy of a real tree (Go's, ~15k files), export it, and
# compare contents, modes, sizes, types, symlink targets and mtimes.
# This is README's main job: `make demo`.
. "$(dirname "$0")/lib.sh"

copy_tree "$WORK/src"
# Go's tree has no symlinks or empty dirs; add some so they round-trip too.
ln -s ../README.md "$WORK/src/src/README.link"; ln -s nowhere "$WORK/src/dangling"; mkdir "$WORK/src/emptydir"
STORE="$WORK/store.layerfs"
say "== init $(find "$WORK/src" -type f | wc -l) files, $(du -sh "$WORK/src" | cut -f1) from $SRC_TREE"
"$LAYERFS" init --store "$STORE" "$WORK/src"
"$LAYERFS" branch fork --store "$STORE" demo main
"$LAYERFS" log --store "$STORE" main
"$LAYERFS" stats --store "$STORE"
say "== export main"
"$LAYERFS" export --store "$STORE" main "$WORK/out"
say "== compare"
diff -r --no-dereference "$WORK/src" "$WORK/out"
# directory sizes are the filesystem's business, so only non-dirs print theirs
meta() { (cd "$1" && find . -mindepth 1 \( -type d -printf '%P %m - %y %l %u %g %T@\n' \) -o -printf '%P %m %s %y %l %u %g %T@\n' | sort); }
if ! diff <(meta "$WORK/src") <(meta "$WORK/out") >"$WORK/meta.diff"; then
	head -20 "$WORK/meta.diff"
	echo "round trip: metadata differs" >&2
	exit 1
fi
"$LAYERFS" fsck --store "$STORE"
say "round trip: no difference in contents, modes, sizes, types, link targets, owners or mtimes"
