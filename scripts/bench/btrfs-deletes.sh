#!/usr/bin/env bash
# What deleting containers costs on a btrfs pool with full quotas (qgroups) against simple quotas,
# in one run on this machine's LXD. A pool of the bench's own (a 6 GiB loop file, `cbdel<PID>`) is
# made with full quotas; N containers from cohort/base, each with a root size as Cohort gives
# them, are launched (so LXD remaps and writes each one's files) and deleted; the bench then
# waits until btrfs has dropped every deleted subvolume. The same again after
# scripts/btrfs-simple-quotas switched the pool to simple quotas. Per mode:
#   delete  - seconds for the N `lxc delete -f`
#   drained - seconds from the first delete until no deleted subvolume is left to clean
#   cleaner - CPU seconds of the pool's own btrfs-cleaner thread over that time
# The pool and its containers are removed after.
#
#   scripts/bench/btrfs-deletes.sh [N]      (default 8)
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-8}
pool=cbdel$$
prefix=cbdel$$-
ticks=$(getconf CLK_TCK)
cleanup() {
  for i in $(seq 1 "$n"); do lxc delete -f "$prefix$i" >/dev/null 2>&1 || true; done
  lxc storage delete "$pool" >/dev/null 2>&1 || true
}
trap cleanup EXIT

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
lxc storage create "$pool" btrfs size=6GiB >/dev/null
mount="${LXD_DIR:-/var/lib/lxd}/storage-pools/$pool"
# The newest btrfs-cleaner thread is this pool's: it starts when the pool is mounted.
cleaner=$(ps -eo pid=,comm= --sort=start_time | awk '$2 == "btrfs-cleaner" { p = $1 } END { print p }')
cleaner_s() { awk -v t="$ticks" '{ printf "%.1f", ($14 + $15) / t }' "/proc/$cleaner/stat"; }
pending() { btrfs subvolume list -d "$mount" | wc -l; }

round() { # <mode>
  for i in $(seq 1 "$n"); do
    lxc launch cohort/base "$prefix$i" -s "$pool" -d root,size=2GiB -c limits.memory=256MiB >/dev/null
  done
  for i in $(seq 1 "$n"); do
    lxc exec "$prefix$i" -- sh -c 'dd if=/dev/urandom of=/root/work bs=1M count=20 status=none'
  done
  sync
  local c0 t0 deleted
  c0=$(cleaner_s)
  t0=$(now)
  for i in $(seq 1 "$n"); do lxc delete -f "$prefix$i" >/dev/null; done
  deleted=$(since "$t0")
  local deadline=$((SECONDS + 900))
  while [ "$(pending)" -gt 0 ] && [ $SECONDS -lt $deadline ]; do sleep 1; done
  [ "$(pending)" -eq 0 ] || echo "warning: $(pending) subvolumes still to clean after 900 s" >&2
  printf '| %s | %s | %s | %s | %s |\n' "$1" "$n" "$deleted" "$(since "$t0")" \
    "$(awk -v a="$c0" -v b="$(cleaner_s)" 'BEGIN { printf "%.1f", b - a }')"
}

echo "| quotas | containers | delete (s) | drained (s) | cleaner CPU (s) |"
echo "|---|---|---|---|---|"
round full
scripts/btrfs-simple-quotas "$mount" >/dev/null
round simple
