#!/usr/bin/env bash
# Benchmark 1 (class bring-up) and 4 (memory), in one run on one machine:
#   cohort   - from `POST /courses/<c>/provision` until every student has logged in over ssh
#   baseline - scripts/bench/lxc-baseline.sh: the parallel lxc loop an admin writes today, each
#              container with a NIC on a bridge (an address set inside) and a proxy device
#   floor    - `lxc launch` of the same number of containers with the NIC, nothing else
# Cohort's containers have their NIC on the node network too (the quickstart's cohort0, with
# NAT SSH); the baseline and the floor use a NAT bridge of the bench's own, cbup<PID> on
# 10.252.0.0/24, made for them and removed after. On a quickstart node running Incus every phase
# runs on Incus (the loops with `incus`).
# Needs the quickstart deployment (scripts/quickstart) running with room for STUDENTS one-core
# containers: on a small machine start it with COHORT_CPU_OVERCOMMIT raised (scripts/bench/run
# does, with COHORT_QUICKSTART_PROFILE=release so that what is measured is optimised code; this
# script uses the CLI of the same profile). Each container gets 1 core, 512 MiB (BENCH_MEMORY_MIB:
# a class of 90 needs less to fit a 24 GiB node) and a 1 GiB root
# quota, as the baseline's do (no disk limit there; btrfs quotas reserve nothing). Prints one table of seconds and ratios, then
# resident memory of the agent, the controller and LXD, idle and during the run, and where each
# phase's host CPU went (from /proc/stat, each daemon's /proc/PID/stat with its reaped children,
# and the containers' and LXD's monitors' cpuacct cgroups), with the cores' idle share; then
# what each phase's idle containers hold (cgroups, monitors, the host kernel), per container that
# came up, and Cohort's share of it above the floor's (issue 49's fourth target).
#
#   scripts/bench/bringup.sh [STUDENTS]      (default 30)
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-30}
export BENCH_MEMORY_MIB=${BENCH_MEMORY_MIB:-512}
state=${COHORT_QUICKSTART_DIR:-/var/lib/cohort-quickstart}
export COHORT_CONF="$state/cli/config.yml"
cohort=target/${COHORT_QUICKSTART_PROFILE:-debug}/cohort
work=$(mktemp -d)
# The node's daemon, as the quickstart enrolled it: on Incus every phase runs on Incus (the loops
# with `incus`, same verbs and flags), its daemon measured where the tables say lxd.
daemon=$(cat "$state/daemon" 2>/dev/null || echo lxd)
if [ "$daemon" = incus ]; then
  lxc() { incus "$@"; }
  export COHORT_BENCH_CLIENT=incus
  daemon_proc=incusd daemon_dir=${INCUS_DIR:-/var/lib/incus}
else
  daemon_proc=lxd daemon_dir=${LXD_DIR:-/var/lib/lxd}
fi

# What a run makes is removed on any exit, and what a run that was killed (or whose machine
# restarted under it) left behind is removed before this one starts: LXD starts such leftovers'
# containers again when it starts, and their proxies would hold the ports the baseline listens on.
# A container whose launch was cut off stays busy in LXD until its start ends ("Instance is busy
# running a start operation"), so its delete is tried again for up to a minute.
drop_project() {
  lxc project show "$1" >/dev/null 2>&1 || return 0
  local left
  for _ in $(seq 1 30); do
    left=$(lxc list --project "$1" -f csv -c n)
    [ -n "$left" ] || break
    for c in $left; do lxc delete -f "$c" --project "$1" >/dev/null 2>&1 || true; done
    [ -z "$(lxc list --project "$1" -f csv -c n)" ] || sleep 2
  done
  lxc project delete "$1" >/dev/null
}
drop_course() {
  "$cohort" course teardown "$1" --delete --force --quiet >/dev/null
  local i
  for i in $(seq -w 1 "$n"); do
    "$cohort" user delete --force --instances delete "b${1#bench}s$i" >/dev/null 2>&1 || true
  done
}
alive() { grep -qs bringup.sh "/proc/$1/cmdline"; }
drop_bridge() { lxc network delete "$1" >/dev/null 2>&1 || true; }
for p in $(lxc project list -f csv | cut -d, -f1); do
  case "$p" in
    bench-baseline-* | bench-floor-*)
      alive "${p##*-}" || { echo "removing project $p, left by an earlier run" >&2; drop_project "$p"; } ;;
  esac
done
while IFS=, read -r code _ _ _ course_state _; do
  case "$code" in bench[0-9]*) ;; *) continue ;; esac
  [ "$course_state" = TORN_DOWN ] || alive "${code#bench}" ||
    { echo "tearing down course $code, left by an earlier run" >&2; drop_course "$code"; }
done < <("$cohort" course list --format csv)
for b in $(lxc network list -f csv | cut -d, -f1); do
  case "$b" in cbup[0-9]*) alive "${b#cbup}" || drop_bridge "$b" ;; esac
done

course="" project="" sampler="" bridge=""
cleanup() {
  [ -z "$sampler" ] || kill "$sampler" 2>/dev/null || true
  [ -z "$course" ] || drop_course "$course" || true
  [ -z "$project" ] || drop_project "$project" || true
  [ -z "$bridge" ] || drop_bridge "$bridge"
  rm -rf "$work"
}
trap cleanup EXIT
ssh-keygen -q -t ed25519 -N '' -f "$work/key"

rss_mib() { awk '/VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$1/status" 2>/dev/null || echo "-"; }
agent_pid=$(cat "$state/agent.pid")
controller_pid=$(cat "$state/controller.pid")
lxd_pid=$(pgrep -o -x "$daemon_proc")
idle="$(rss_mib "$agent_pid") $(rss_mib "$controller_pid") $(rss_mib "$lxd_pid")"

peak_file="$work/peak"
echo "0 0 0" >"$peak_file"
sample() {
  while :; do
    read -r a c l <"$peak_file"
    na=$(rss_mib "$agent_pid"); nc=$(rss_mib "$controller_pid"); nl=$(rss_mib "$lxd_pid")
    awk -v a="$a" -v c="$c" -v l="$l" -v na="$na" -v nc="$nc" -v nl="$nl" \
      'BEGIN { printf "%s %s %s\n", (na>a?na:a), (nc>c?nc:c), (nl>l?nl:l) }' >"$peak_file"
    sleep 0.5
  done
}

now() { date +%s.%N; }

# Each phase starts on a settled pool: btrfs deletes a removed container's subvolume in the
# background (btrfs-cleaner, slow with the quotas root-disk limits turn on), and that work would
# otherwise land on whichever phase runs next.
pool_dir=$(lxc storage get cohort source 2>/dev/null || true)
[ -d "$pool_dir" ] || pool_dir="$daemon_dir/storage-pools/cohort"
settle() {
  if [ "$(lxc storage show cohort 2>/dev/null | awk '/^driver:/ {print $2}')" = btrfs ]; then
    btrfs subvolume sync "$pool_dir" >/dev/null 2>&1 || true
  fi
  sync
}
elapsed() { awk -v s="$1" -v e="$2" 'BEGIN { printf "%.1f", e - s }'; }

# Host CPU samples and the CPU table's rows (cpu_sample, cpu_row).
source scripts/bench/cpu.sh
source scripts/bench/class.sh
# The host's memory in use (MiB): what the kernel could not hand out without swapping.
mem_used() { awk '/^MemTotal/ { t = $2 } /^MemAvailable/ { a = $2 } END { printf "%.0f", (t - a) / 1024 }' /proc/meminfo; }
# The host's kernel memory it cannot reclaim (MiB): slab (a container's veth pair, netfilter
# rules, mounts and subvolumes are here, charged to no container) and page tables.
kernel_used() { awk '/^(SUnreclaim|PageTables):/ { k += $2 } END { printf "%.1f", k / 1024 }' /proc/meminfo; }
# The growth of a kernel_used figure, per container (arguments: before, after, containers).
per_container() { awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN { printf "%.1f", (b - a) / (n ? n : 1) }'; }
# Memory per idle student: the host's memory in use with the class's containers up and idle (10 s
# after the last login) less the same before the phase, per student.
idle_mem_per_student() {
  sleep 10
  sync
  awk -v a="$1" -v b="$(mem_used)" -v n="$n" 'BEGIN { printf "%.1f", (b - a) / n }'
}
# What a phase's idle containers hold, per student (MiB): from their memory cgroups (v1, as
# LXD and Incus make them here) anonymous memory and kernel memory; the anonymous memory of the
# LXD or Incus monitor process each has on the host (read from the process: v1 leaves what it
# allocated charged to the daemon's cgroup it was forked from); the sum of those three (what the
# kernel cannot take back); and page cache (which it can). Argument: the cgroups' name pattern.
cgroup_mem() {
  local root=/sys/fs/cgroup/memory d
  [ -r "$root/memory.stat" ] || { echo "- - - - -"; return; }
  {
    for d in "$root"/lxc.payload.$1; do
      [ -d "$d" ] || continue
      awk -v kmem="$(cat "$d/memory.kmem.usage_in_bytes")" \
        '/^total_rss / { r = $2 } /^total_cache / { c = $2 } END { print "p", r, c, kmem }' \
        "$d/memory.stat"
    done
    for d in "$root"/lxc.monitor.$1; do
      [ -d "$d" ] || continue
      for pid in $(cat "$d/cgroup.procs"); do
        awk '/^RssAnon:/ { print "m", $2 * 1024 }' "/proc/$pid/status" 2>/dev/null || true
      done
    done
  } | awk '{ if ($1 == "p") { a += $2; c += $3; k += $4; n++ } else m += $2 }
    END { m2 = 1048576 * (n ? n : 1); printf "%.1f %.1f %.1f %.1f %.1f %d\n", a / m2, k / m2,
      m / m2, (a + k + m) / m2, c / m2, n }'
}
# --- Cohort ---------------------------------------------------------------------------------
course=bench$$
bench_class "$course" cohort/base "$BENCH_MEMORY_MIB" "b$$s" "$n" "$work/key.pub"
settle
sample & sampler=$!
cohort_mem0=$(mem_used)
cohort_kernel0=$(kernel_used)
cohort_cpu0=$(cpu_sample)
start=$(now)
"$cohort" course provision "$course" --wait --quiet
"$cohort" course endpoints "$course" --format csv | tail -n +2 >"$work/endpoints"
while IFS=, read -r user _ _ host port _; do
  (
    for _ in $(seq 1 600); do
      ssh -p "$port" -i "$work/key" -o BatchMode=yes -o IdentitiesOnly=yes -o ConnectTimeout=2 \
        -o StrictHostKeyChecking=no -o "UserKnownHostsFile=$work/known" -o LogLevel=ERROR \
        "$user@$host" true </dev/null && exit 0
      sleep 0.2
    done
    exit 1
  ) &
done <"$work/endpoints"
wait_ok=0
for job in $(jobs -p); do [ "$job" = "$sampler" ] || wait "$job" || wait_ok=1; done
cohort_s=$(elapsed "$start" "$(now)")
cohort_cpu1=$(cpu_sample)
cohort_mem=$(idle_mem_per_student "$cohort_mem0")
cohort_cg=$(cgroup_mem "*_$course-*")
cohort_kernel=$(per_container "$cohort_kernel0" "$(kernel_used)" "${cohort_cg##* }")
kill "$sampler" 2>/dev/null || true
sampler=""
read -r peak_agent peak_controller peak_lxd <"$peak_file"
[ "$wait_ok" -eq 0 ] || echo "warning: some cohort logins failed" >&2
drop_course "$course"
course=""

# --- baseline and floor ---------------------------------------------------------------------
bridge=cbup$$
lxc network create "$bridge" ipv4.address=10.252.0.1/24 ipv4.nat=true ipv6.address=none >/dev/null
export BENCH_BRIDGE=$bridge BENCH_PREFIX=10.252.0
for mode in baseline floor; do
  project="bench-$mode-$$"
  lxc project create "$project" -c features.images=false -c features.profiles=false >/dev/null
  flag=""; [ "$mode" = floor ] && flag=--floor
  settle
  mem0=$(mem_used)
  kernel0=$(kernel_used)
  cpu0=$(cpu_sample)
  out=$(scripts/bench/lxc-baseline.sh "$project" "$n" 23000 "$work/key.pub" "$work/key" $flag \
    2>"$work/$mode.err")
  grep '^retry:' "$work/$mode.err" | sed "s/^/$mode: /" >&2 || true
  retries=$(grep -c '^retry:' "$work/$mode.err" || true)
  lost=$(grep -c 'never came up' "$work/$mode.err" || true)
  eval "${mode}_retries=$retries ${mode}_lost=$lost"
  secs=$(echo "$out" | awk '/^elapsed_s/ {print $2}')
  eval "${mode}_s=$secs"
  eval "${mode}_cpu0='$cpu0' ${mode}_cpu1='$(cpu_sample)'"
  eval "${mode}_mem=$(idle_mem_per_student "$mem0")"
  cg=$(cgroup_mem "${project}_*")
  eval "${mode}_cg='$cg' ${mode}_kernel=$(per_container "$kernel0" "$(kernel_used)" "${cg##* }")"
  drop_project "$project"
  project=""
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
echo
echo "| students | cohort (s) | baseline (s) | floor (s) | cohort/baseline | cohort/floor |"
echo "|---|---|---|---|---|---|"
echo "| $n | $cohort_s | $baseline_s | $floor_s | $(ratio "$cohort_s" "$baseline_s") | $(ratio "$cohort_s" "$floor_s") |"
echo
echo "Containers the lxc loops had to delete and launch again (LXD 5.0.2's idmap race):" \
  "baseline $baseline_retries, floor $floor_retries; never came up: baseline $baseline_lost," \
  "floor $floor_lost."
echo
read -r idle_agent idle_controller idle_lxd <<<"$idle"
echo "| RSS (MiB) | agent | controller | $daemon_proc |"
echo "|---|---|---|---|"
echo "| idle | $idle_agent | $idle_controller | $idle_lxd |"
echo "| peak during bring-up | $peak_agent | $peak_controller | $peak_lxd |"
echo
echo "Host CPU seconds of each phase (launch to the last ssh login; the loops' own lxc and ssh"
echo "clients, Cohort's CLI and ssh logins, and the kernel's threads are in 'rest'):"
echo
echo "| phase | wall (s) | host CPU-s | per student | cores idle | $daemon_proc | agent | controller | postgres | containers | rest |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
cpu_row cohort "$cohort_s" "$cohort_cpu0" "$cohort_cpu1"
cpu_row baseline "$baseline_s" "$baseline_cpu0" "$baseline_cpu1"
cpu_row floor "$floor_s" "$floor_cpu0" "$floor_cpu1"
echo
echo "| host memory per idle student (MiB) | cohort | baseline | floor |"
echo "|---|---|---|---|"
echo "| in use with the class idle, less before, per student | $cohort_mem | $baseline_mem | $floor_mem |"
echo
echo "What the containers hold, per idle student (MiB), from their memory cgroups and monitors, and"
echo "the host kernel's own unreclaimable memory (slab, page tables) grown with the phase:"
echo
echo "| phase | containers | anonymous | kernel | monitor | not reclaimable | page cache | host kernel, outside the cgroups |"
echo "|---|---|---|---|---|---|---|---|"
# Named unlike the CPU table's rows, which scripts/bench/run reads by their names.
for mode in cohort baseline floor; do
  eval "set -- \$${mode}_cg \$${mode}_kernel"
  label=Cohort
  [ "$mode" = cohort ] || label="the $mode"
  echo "| $label | $6 | $1 | $2 | $3 | $4 | $5 | $7 |"
done
set -- $cohort_cg $cohort_kernel
c=$4 ck=$7
set -- $floor_cg $floor_kernel
echo
echo "Cohort's share above the floor, a student: $(awk -v c="$c" -v f="$4" 'BEGIN { printf "%.1f", c - f }')" \
  "MiB in the containers and their monitors, $(awk -v c="$c" -v ck="$ck" -v f="$4" -v fk="$7" \
    'BEGIN { printf "%.1f", c + ck - f - fk }') MiB with the host's kernel memory outside them."
