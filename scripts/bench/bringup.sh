#!/usr/bin/env bash
# Benchmark 1 (class bring-up) and 4 (memory), in one run on one machine:
#   cohort   - from `POST /courses/<c>/provision` until every student has logged in over ssh
#   baseline - scripts/bench/lxc-baseline.sh: the parallel lxc loop an admin writes today, each
#              container with a NIC on a bridge (an address set inside) and a proxy device
#   floor    - `lxc launch` of the same number of containers with the NIC, nothing else
# Cohort's containers have their NIC on the node network too (the quickstart's cohort0, with
# NAT SSH); the baseline and the floor use a NAT bridge of the bench's own, cbup<PID> on
# 10.252.0.0/24, made for them and removed after.
# Needs the quickstart deployment (scripts/quickstart) running with room for STUDENTS one-core
# containers: on a small machine start it with COHORT_CPU_OVERCOMMIT raised (scripts/bench/run
# does, with COHORT_QUICKSTART_PROFILE=release so that what is measured is optimised code; this
# script uses the CLI of the same profile). Each container gets 1 core, 512 MiB and a 1 GiB root
# quota, as the baseline's do (no disk limit there; btrfs quotas reserve nothing). Prints one table of seconds and ratios, then
# resident memory of the agent, the controller and LXD, idle and during the run.
#
#   scripts/bench/bringup.sh [STUDENTS]      (default 30)
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-30}
state=${COHORT_QUICKSTART_DIR:-/var/lib/cohort-quickstart}
export COHORT_CONF="$state/cli/config.yml"
cohort=target/${COHORT_QUICKSTART_PROFILE:-debug}/cohort
work=$(mktemp -d)

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
lxd_pid=$(pgrep -o -x lxd)
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
[ -d "$pool_dir" ] || pool_dir="${LXD_DIR:-/var/lib/lxd}/storage-pools/cohort"
settle() {
  if [ "$(lxc storage show cohort 2>/dev/null | awk '/^driver:/ {print $2}')" = btrfs ]; then
    btrfs subvolume sync "$pool_dir" >/dev/null 2>&1 || true
  fi
  sync
}
elapsed() { awk -v s="$1" -v e="$2" 'BEGIN { printf "%.1f", e - s }'; }

# --- Cohort ---------------------------------------------------------------------------------
course=bench$$
"$cohort" course create "$course" --title "bench" --image cohort/base --cpu 1 --memory 512MiB \
  --disk 1GiB >/dev/null
{
  echo "username,name,email,ssh_key"
  # Names of this run's own: an account made by an earlier run keeps that run's key (a roster
  # adds no key to an existing account), and no login with this run's key would succeed.
  for i in $(seq -w 1 "$n"); do echo "b$$s$i,,,$(cat "$work/key.pub")"; done
} >"$work/roster.csv"
"$cohort" course roster "$course" "$work/roster.csv" >/dev/null
settle
sample & sampler=$!
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
  out=$(scripts/bench/lxc-baseline.sh "$project" "$n" 23000 "$work/key.pub" "$work/key" $flag \
    2>"$work/$mode.err")
  retries=$(grep -c '^retry:' "$work/$mode.err" || true)
  lost=$(grep -c 'never came up' "$work/$mode.err" || true)
  eval "${mode}_retries=$retries ${mode}_lost=$lost"
  secs=$(echo "$out" | awk '/^elapsed_s/ {print $2}')
  eval "${mode}_s=$secs"
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
echo "| RSS (MiB) | agent | controller | lxd |"
echo "|---|---|---|---|"
echo "| idle | $idle_agent | $idle_controller | $idle_lxd |"
echo "| peak during bring-up | $peak_agent | $peak_controller | $peak_lxd |"
