#!/usr/bin/env bash
# The mounted tree against the same tree on ext4 and against go-fuse's own
# loopback filesystem over that ext4 copy, in one run: tar and find walks
# (cold: page cache dropped and layerfs remounted; warm: the pass right
# after), sequential reads of a 1 GiB file, and mount time. Prints medians
# of RUNS runs and ratios. Needs root (mounts, drop_caches).
#
# Targets (README): warm tar within 1.2x of ext4; cold tar and the find walk
# no slower than loopback; 1 GiB sequential read at least 500 MB/s; mount of
# a 15k-file Commit under 50 ms.
. "$(dirname "$0")/lib.sh"
RUNS=${RUNS:-5}
[ "$(id -u)" = 0 ] || { echo "mount.sh needs root" >&2; exit 1; }

# data/src is the tree and data/big/big the 1 GiB file, on ext4; lb is
# go-fuse's loopback over data/.
D="$WORK/data" MNT="$WORK/mnt" LB="$WORK/lb" BIGMNT="$WORK/bigmnt"
mkdir -p "$MNT" "$LB" "$BIGMNT" "$D/big"
LBPID=
cleanup() {
	for m in "$MNT" "$BIGMNT"; do
		grep -q " $m " /proc/mounts && "$LAYERFS" umount --lazy "$m"
	done
	[ -n "$LBPID" ] && kill -TERM "$LBPID" 2>/dev/null && wait "$LBPID" # it exits within 5 s
	grep -q " $LB " /proc/mounts && umount -l "$LB"
	rm -rf "$WORK"
}
trap cleanup EXIT

drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }
gone() { while grep -q " $1 " /proc/mounts; do sleep 0.01; done; }
lfs_mount() { "$LAYERFS" mount --store "$1" main "$2"; }
lfs_umount() { "$LAYERFS" umount "$1" && gone "$1"; }
# timed CMD...: runs CMD with its output discarded and prints the seconds.
timed() { local t; t=$(now); "$@" >/dev/null 2>&1; elapsed "$t"; }
walk_tar() { tar cf /dev/null -C "$1" .; }
walk_tar_cat() { tar cf - -C "$1" . | cat >/dev/null; }
walk_find() { find "$1" -type f | wc -l; }
read_big() { cat "$1" >/dev/null; }

say "== mount: $(nproc) cores, $(uname -r); tree $SRC_TREE"
copy_tree "$D/src"
S="$WORK/s.layerfs"
"$LAYERFS" init --quiet --store "$S" "$D/src"
say "tree: $(find "$D/src" -type f | wc -l) files, $(find "$D/src" -type d | wc -l) dirs, $(du -sb "$D/src" | cut -f1) bytes"
head -c 1073741824 /dev/urandom >"$D/big/big"
BS="$WORK/big.layerfs"
"$LAYERFS" init --quiet --store "$BS" "$D/big"
(cd "$ROOT" && go build -o "$WORK/loopback" ./bench/loopback)
"$WORK/loopback" "$D" "$LB" >/dev/null &
LBPID=$!
while ! grep -q " $LB " /proc/mounts; do sleep 0.01; done

# One run of every measurement: each writes a line to $WORK/<name>.
measure() { # name command...
	local name=$1; shift
	"$@" >>"$WORK/$name"
}
cold_warm() { # label walk-function
	local label=$1 walk=$2
	drop; measure "$label.ext4.cold" timed $walk "$D/src"
	measure "$label.ext4.warm" timed $walk "$D/src"
	drop; measure "$label.loopback.cold" timed $walk "$LB/src"
	measure "$label.loopback.warm" timed $walk "$LB/src"
	lfs_mount "$S" "$MNT"; drop
	measure "$label.layerfs.cold" timed $walk "$MNT"
	measure "$label.layerfs.warm" timed $walk "$MNT"
	lfs_umount "$MNT"
}
seq_read() {
	drop; measure read.ext4.cold timed read_big "$D/big/big"
	drop; measure read.loopback.cold timed read_big "$LB/big/big"
	lfs_mount "$BS" "$BIGMNT"; cat "$BS" >/dev/null # Store file cached, mount fresh
	measure read.layerfs.storecached timed read_big "$BIGMNT/big"
	measure read.layerfs.warm timed read_big "$BIGMNT/big"
	lfs_umount "$BIGMNT"
	lfs_mount "$BS" "$BIGMNT"; drop # nothing cached anywhere
	measure read.layerfs.cold timed read_big "$BIGMNT/big"
	lfs_umount "$BIGMNT"
}
# mount_time: layerfs mount of the tree's Commit, from process start until
# it returns with the mount ready (it starts a background server and waits
# for it), with the binary and the Store file in the page cache.
mount_time() {
	lfs_mount "$S" "$MNT"; lfs_umount "$MNT"
	local t; t=$(now); lfs_mount "$S" "$MNT"; elapsed "$t" >>"$WORK/mount.cli"
	stat "$MNT/src" >/dev/null; lfs_umount "$MNT"
}
for i in $(seq "$RUNS"); do
	cold_warm tar walk_tar
	cold_warm tarcat walk_tar_cat
	cold_warm find walk_find
	seq_read
	mount_time
done

med() { median <"$WORK/$1"; }
row() { # label: ext4, loopback, layerfs medians and the two ratios
	local e l f; e=$(med "$1.ext4.$2") l=$(med "$1.loopback.$2") f=$(med "$1.layerfs.$2")
	say "$(printf '%-22s ext4 %7.3f s  loopback %7.3f s  layerfs %7.3f s   layerfs/ext4 %5.2fx  layerfs/loopback %5.2fx' \
		"$3" "$e" "$l" "$f" "$(ratio "$f" "$e")" "$(ratio "$f" "$l")")"
}
mbs() { echo "scale=0; 1073.741824 / $(med "$1")" | bc; }
say "medians of $RUNS runs:"
row tar cold "tar cf /dev/null, cold"
row tar warm "tar cf /dev/null, warm"
row tarcat cold "tar cf - | cat, cold"
row tarcat warm "tar cf - | cat, warm"
row find cold "find -type f, cold"
row find warm "find -type f, warm"
say "1 GiB sequential read: layerfs $(mbs read.layerfs.storecached) MB/s (fresh mount, Store file cached)," \
	"$(mbs read.layerfs.cold) MB/s (nothing cached), $(mbs read.layerfs.warm) MB/s (second pass);" \
	"ext4 $(mbs read.ext4.cold) MB/s cold, loopback $(mbs read.loopback.cold) MB/s cold"
say "mount of the tree's Commit ($(find "$D/src" | wc -l) paths): layerfs mount, process start to ready," \
	"$(echo "$(med mount.cli) * 1000 / 1" | bc) ms (fusefs.Mount alone: go test -bench MountTime ./bench/)"
