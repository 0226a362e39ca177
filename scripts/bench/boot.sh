#!/usr/bin/env bash
# Issue 49's second target, a leaner boot: host CPU a student spends from `course provision` to
# their first ssh login, with the base image as built (its lean boot, images/base/customize.sh)
# against the same image with the lean boot undone (every path listed in the image's
# /usr/share/cohort/lean-boot removed), in one run on the quickstart node, alternating the two.
# Both are imported through Cohort (`cohort image import`, aliases bench/lean-PID and
# bench/stock-PID) and removed after. Each student: 1 core, 256 MiB, 1 GiB root, a home, NAT SSH.
# Where `perf` is installed, the last round of each image is also sampled (cpu-clock, every
# cgroup) and its CPU printed per unit inside the containers and per process on the host.
#
#   scripts/bench/boot.sh [STUDENTS] [ROUNDS]      (default 10 2; scripts/bench/run: 10 4)
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-10}
rounds=${2:-2}
state=${COHORT_QUICKSTART_DIR:-/var/lib/cohort-quickstart}
export COHORT_CONF="$state/cli/config.yml"
cohort=target/${COHORT_QUICKSTART_PROFILE:-debug}/cohort
daemon=$(cat "$state/daemon" 2>/dev/null || echo lxd)
if [ "$daemon" = incus ]; then daemon_proc=incusd; else daemon_proc=lxd; fi
# The tarball of the recipe as it is now (built if the cache lacks it; the build keeps only the
# current recipe's tarball in the cache).
images/build base >/dev/null
lean_tarball=$(ls -t /var/cache/cohort/cohort-base-*.tar.gz | head -n 1)
"$cohort" course list --format csv >/dev/null 2>&1 ||
  { echo "Error: no quickstart deployment answers (start it with scripts/quickstart)" >&2; exit 2; }
work=$(mktemp -d /var/tmp/cohort-boot.XXXXXX)
drop_course() {
  "$cohort" course teardown "$1" --delete --force --quiet >/dev/null || true
  local i
  for i in $(seq -w 1 "$n"); do
    "$cohort" user delete --force --instances delete "${1}s$i" >/dev/null 2>&1 || true
  done
}
# A phase runs in a subshell (its figures are read from it), so a run killed mid-phase leaves
# its course to the next run's start, which tears down what no live run owns.
cleanup() {
  for image in lean stock; do "$cohort" image delete "bench/$image-$$" >/dev/null 2>&1 || true; done
  rm -rf "$work"
  [ -z "${clients:-}" ] || rmdir "$clients" 2>/dev/null || true
}
trap cleanup EXIT
# What a run that was killed left behind: its courses (boot<PID>...) and its two images.
alive() { grep -qs boot.sh "/proc/$1/cmdline"; }
while IFS=, read -r code _ _ _ course_state _; do
  pid=$(echo "$code" | sed -n 's/^boot\([0-9]*\)[a-z].*/\1/p')
  [ -n "$pid" ] && [ "$course_state" != TORN_DOWN ] && ! alive "$pid" || continue
  echo "tearing down course $code, left by an earlier run" >&2
  drop_course "$code"
done < <("$cohort" course list --format csv)
for alias in $("$cohort" image list --format csv | cut -d, -f1 | grep -E '^bench/(lean|stock)-[0-9]+$' || true); do
  alive "${alias##*-}" || "$cohort" image delete "$alias" >/dev/null
done
ssh-keygen -q -t ed25519 -N '' -f "$work/key"

# Both images are packed here the same way from the cached tarball (so neither has the
# fingerprint of the quickstart's own cohort/base, which Cohort would refuse to import twice):
# the lean one as built, the unchanged one with the lean boot's paths taken out again.
mkdir "$work/tree"
tar -C "$work/tree" --numeric-owner --xattrs -xzf "$lean_tarball"
list="$work/tree/rootfs/usr/share/cohort/lean-boot"
[ -s "$list" ] || { echo "Error: $lean_tarball has no /usr/share/cohort/lean-boot" >&2; exit 2; }
pack() {
  tar -C "$work/tree" --numeric-owner --xattrs -cf - metadata.yaml templates rootfs |
    gzip -1 >"$work/$1.tar.gz"
}
pack lean
while read -r path; do rm -f "$work/tree/rootfs$path"; done <"$list"
echo "undone in bench/stock-$$: $(tr '\n' ' ' <"$list")"
pack stock
rm -rf "$work/tree"
for image in lean stock; do
  "$cohort" image import "$work/$image.tar.gz" --alias "bench/$image-$$" --quiet >/dev/null
  rm -f "$work/$image.tar.gz"
done

agent_pid=$(cat "$state/agent.pid")
controller_pid=$(cat "$state/controller.pid")
lxd_pid=$(pgrep -o -x "$daemon_proc")
source scripts/bench/cpu.sh
source scripts/bench/class.sh
if [ "$daemon" = incus ]; then client=incus daemon_dir=${INCUS_DIR:-/var/lib/incus}
else client=lxc daemon_dir=${LXD_DIR:-/var/lib/lxd}; fi
pool_dir=$($client storage get cohort source 2>/dev/null || true)
[ -d "$pool_dir" ] || pool_dir="$daemon_dir/storage-pools/cohort"
# The previous phase's deletes (btrfs-cleaner) finish before the next phase is measured.
settle() {
  btrfs subvolume sync "$pool_dir" >/dev/null 2>&1 || true
  sync
  sleep 3
}
# The bench's own ssh clients stand for the students' laptops: they run in a cpuacct cgroup of
# their own, so their CPU is shown apart from the node's.
clients=/sys/fs/cgroup/cpuacct/cohort-boot-clients-$$
mkdir "$clients" 2>/dev/null || clients=""
client_ns() { if [ -n "$clients" ]; then cat "$clients/cpuacct.usage"; else echo 0; fi; }
perf_on=""
command -v perf >/dev/null 2>&1 && perf_on=1

# One phase: a course of n students on IMAGE, from provision to every student's first login.
# Prints "wall node clients daemon agent controller containers" (CPU-s a student, wall in s):
# node is the host's busy CPU less the bench's ssh clients'.
phase() {
  local image=$1 tag=$2 profile=$3 course="boot$$$2" c0 c1 k0 k1 start end perf_pid=""
  bench_class "$course" "$image" 256 "${course}s" "$n" "$work/key.pub"
  settle
  if [ -n "$profile" ] && [ -n "$perf_on" ]; then
    perf record -q -e cpu-clock -a -F 499 --all-cgroups -o "$work/$tag.perf" >/dev/null 2>&1 &
    perf_pid=$!
    sleep 1
  fi
  c0=$(cpu_sample)
  k0=$(client_ns)
  start=$(date +%s.%N)
  "$cohort" course provision "$course" --wait --quiet
  "$cohort" course endpoints "$course" --format csv | tail -n +2 >"$work/endpoints"
  local logins=()
  while IFS=, read -r user _ _ host port _; do
    (
      [ -z "$clients" ] || echo "$BASHPID" >"$clients/cgroup.procs"
      for _ in $(seq 1 300); do
        ssh -p "$port" -i "$work/key" -o BatchMode=yes -o IdentitiesOnly=yes -o ConnectTimeout=2 \
          -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR \
          "$user@$host" true </dev/null && exit 0
        sleep 0.2
      done
      exit 1
    ) &
    logins+=($!)
  done <"$work/endpoints"
  local failed=0 job
  for job in "${logins[@]}"; do wait "$job" || failed=1; done
  end=$(date +%s.%N)
  c1=$(cpu_sample)
  k1=$(client_ns)
  if [ -n "$perf_pid" ]; then kill -INT "$perf_pid"; wait "$perf_pid" 2>/dev/null || true; fi
  [ "$failed" -eq 0 ] || echo "warning: some logins failed ($tag)" >&2
  drop_course "$course"
  awk -v s="$start" -v e="$end" -v a="$c0" -v b="$c1" -v n="$n" -v k="$((k1 - k0))" 'BEGIN {
    split(a, x, " "); split(b, y, " "); k = k / 1e9 / n;
    printf "%.1f %.3f %.3f %.3f %.3f %.3f %.3f\n", e - s, (y[1] - x[1]) / n - k, k,
      (y[3] - x[3]) / n, (y[4] - x[4]) / n, (y[5] - x[5]) / n, (y[7] - x[7]) / n }'
}

# A student of each image first, unmeasured: the node unpacks each image onto its pool once.
phase "bench/stock-$$" warmstock "" >/dev/null
phase "bench/lean-$$" warmlean "" >/dev/null
echo "| round | image | wall (s) | node CPU-s a student | ssh clients | $daemon_proc | agent | controller | containers |"
echo "|---|---|---|---|---|---|---|---|---|"
for r in $(seq 1 "$rounds"); do
  profile=""
  [ "$r" -eq "$rounds" ] && profile=1
  # Alternating which goes first, so neither always follows the other's teardown.
  order="stock lean"
  [ $((r % 2)) -eq 0 ] && order="lean stock"
  for image in $order; do
    read -r wall node client d a c y < <(phase "bench/$image-$$" "$image$r" "$profile")
    echo "| $r | $image | $wall | $node | $client | $d | $a | $c | $y |"
    echo "$image $node $y" >>"$work/busy"
  done
done
awk '{ s[$1] += $2; y[$1] += $3; k[$1]++ } END {
  l = s["lean"] / k["lean"]; t = s["stock"] / k["stock"];
  printf "\nmean node CPU a student: lean %.3f, unchanged image %.3f (%.2f of it; target 0.8 CPU-s)\n", l, t, l / t;
  printf "mean containers CPU a student: lean %.3f, unchanged image %.3f\n", y["lean"] / k["lean"], y["stock"] / k["stock"] }' "$work/busy"

# Where the last round's CPU went, per student: inside the containers by unit (the cgroup below
# the container's own), on the host by process name.
[ -n "$perf_on" ] || { echo "(perf not installed: no breakdown by unit)"; exit 0; }
for image in stock lean; do
  f="$work/${image}$rounds.perf"
  [ -s "$f" ] || continue
  echo
  echo "$image image, last round, CPU-s a student (perf cpu-clock at 499 Hz; 0.01 and above):"
  perf report -i "$f" --sort cgroup,comm --stdio -n 2>/dev/null | grep -v '^#' | grep -v '^$' |
    awk -v n="$n" -v hz=499 '{
      cg = $3; comm = $4; s = $2 / hz / n;
      if (comm == "swapper") next;
      if (cg ~ /lxc\.payload\./) { sub(/^\/lxc\.payload\.[^\/]*/, "", cg); k = "container " (cg == "" ? "/" : cg) }
      else if (cg ~ /lxc\.monitor\./) k = "monitor " comm;
      else k = "host " comm;
      t[k] += s } END { for (k in t) if (t[k] >= 0.01) printf "%8.3f  %s\n", t[k], k }' | sort -rn
done
