#!/usr/bin/env bash
# Class bring-up on an Incus node, on an LXD node and with the admin's loop written with `incus`
# commands (scripts/bench/lxc-baseline.sh with COHORT_BENCH_CLIENT=incus), at each class size, in
# one run on this machine. Per run:
#   wall    - from `course provision` (the loop's first launch) until every student has logged in
#   CPU     - host CPU seconds over the run (/proc/stat, every core's user, nice, system, irq,
#             softirq and steal time: the daemon, its helpers, the agent, the containers' boots,
#             and whatever else the machine runs meanwhile), per student
#   memory  - host memory in use (MemTotal - MemAvailable) with every student's container up,
#             less the same before the run, per student
# The quickstart deployment is made on Incus, then on LXD (`scripts/quickstart --reset`, then
# COHORT_DAEMON=incus|lxd scripts/quickstart): this deletes the quickstart's demo class. The
# quickstart's profile (COHORT_QUICKSTART_PROFILE, default debug) is the one measured. The loop
# launches onto a NAT bridge of its own, cbin<PID> on 10.253.0.0/24 on Incus, removed after.
#
#   scripts/bench/daemons.sh [STUDENTS...]      (default 20 30)
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ $# -gt 0 ]; then sizes=("$@"); else sizes=(20 30); fi
largest=$(printf '%s\n' "${sizes[@]}" | sort -n | tail -n 1)
state=${COHORT_QUICKSTART_DIR:-/var/lib/cohort-quickstart}
export COHORT_CONF="$state/cli/config.yml"
cohort=target/${COHORT_QUICKSTART_PROFILE:-debug}/cohort
work=$(mktemp -d)
course="" bridge="" project=""

cleanup() {
  [ -z "$course" ] || drop_course "$course" "$course_n" || true
  [ -z "$project" ] || drop_project "$project" || true
  [ -z "$bridge" ] || incus network delete "$bridge" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
ssh-keygen -q -t ed25519 -N '' -f "$work/key"

ticks=$(getconf CLK_TCK)
cpu_s() { awk -v t="$ticks" '/^cpu / { printf "%.2f", ($2 + $3 + $4 + $7 + $8 + $9) / t; exit }' /proc/stat; }
used_mib() { awk '/^MemTotal:/ {t = $2} /^MemAvailable:/ {a = $2} END { printf "%.1f", (t - a) / 1024 }' /proc/meminfo; }
now() { date +%s.%N; }
per() { awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN { printf "%.2f", (b - a) / n }'; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
# A removed container's subvolume is deleted by btrfs in the background: wait for that before a
# run, so it does not land on the next one (bounded: on a busy pool it can take minutes).
settle() {
  for dir in /var/lib/incus /var/lib/lxd; do
    timeout 120 btrfs subvolume sync "$dir/storage-pools/cohort" >/dev/null 2>&1 || true
  done
  sync
}

drop_course() {
  "$cohort" course teardown "$1" --delete --force --quiet >/dev/null
  local i
  for i in $(seq -w 1 "$2"); do
    "$cohort" user delete --force --instances delete "d${1#dbench}s$i" >/dev/null 2>&1 || true
  done
}
drop_project() {
  incus project show "$1" >/dev/null 2>&1 || return 0
  local c
  for _ in $(seq 1 30); do
    for c in $(incus list --project "$1" -f csv -c n); do
      incus delete -f "$c" --project "$1" >/dev/null 2>&1 || true
    done
    [ -z "$(incus list --project "$1" -f csv -c n)" ] && break
    sleep 2
  done
  incus project delete "$1" >/dev/null
}

rows=()
# Appends a table row (and shows it on stderr at once, so a cut-off run still tells something).
row() {
  rows+=("$1")
  echo "$1" >&2
}
measure_cohort() {
  local daemon=$1 n=$2 start cpu0 mem0 wall cpu1 mem1 failed=0
  course=dbench$$x$n course_n=$n
  "$cohort" course create "$course" --title bench --image cohort/base --cpu 1 --memory 512MiB \
    --disk 1GiB --home-size 1GiB >/dev/null
  {
    echo "username,name,email,ssh_key"
    for i in $(seq -w 1 "$n"); do echo "d$$x${n}s$i,,,$(cat "$work/key.pub")"; done
  } >"$work/roster.csv"
  "$cohort" course roster "$course" "$work/roster.csv" >/dev/null
  settle
  mem0=$(used_mib) cpu0=$(cpu_s) start=$(now)
  "$cohort" course provision "$course" --wait --quiet
  "$cohort" course endpoints "$course" --format csv | tail -n +2 >"$work/endpoints"
  # Known hosts of this class's own: the next class answers on the same ports with new keys.
  while IFS=, read -r user _ _ host port _; do
    (
      for _ in $(seq 1 600); do
        ssh -p "$port" -i "$work/key" -o BatchMode=yes -o IdentitiesOnly=yes \
          -o ConnectTimeout=2 -o StrictHostKeyChecking=no -o "UserKnownHostsFile=$work/known.$course" \
          -o LogLevel=ERROR "$user@$host" true </dev/null && exit 0
        sleep 0.2
      done
      exit 1
    ) &
  done <"$work/endpoints"
  for job in $(jobs -p); do wait "$job" || failed=$((failed + 1)); done
  wall=$(awk -v s="$start" -v e="$(now)" 'BEGIN { printf "%.1f", e - s }')
  cpu1=$(cpu_s) mem1=$(used_mib)
  [ "$failed" -eq 0 ] || echo "warning: $failed of $n logins failed on the $daemon node" >&2
  row "| Cohort, $daemon node | $n | $wall | $(per "$cpu0" "$cpu1" "$n") | $(per "$mem0" "$mem1" "$n") | $(load) |"
  drop_course "$course" "$n"
  course=""
}

measure_incus_loop() {
  local n=$1 out cpu0 mem0 cpu1 mem1 retries lost
  project=dbench-loop-$$
  incus project create "$project" -c features.images=false -c features.profiles=false >/dev/null
  settle
  mem0=$(used_mib) cpu0=$(cpu_s)
  out=$(COHORT_BENCH_CLIENT=incus BENCH_BRIDGE=$bridge BENCH_PREFIX=10.253.0 \
    scripts/bench/lxc-baseline.sh "$project" "$n" 23500 "$work/key.pub" "$work/key" 2>"$work/loop.err")
  cpu1=$(cpu_s) mem1=$(used_mib)
  retries=$(grep -c '^retry:' "$work/loop.err" || true)
  lost=$(grep -c 'never came up' "$work/loop.err" || true)
  [ "$retries$lost" = 00 ] || echo "warning: the incus loop retried $retries, lost $lost" >&2
  row "| admin loop, \`incus\` | $n | $(echo "$out" | awk '/^elapsed_s/ {printf "%.1f", $2}') | $(per "$cpu0" "$cpu1" "$n") | $(per "$mem0" "$mem1" "$n") | $(load) |"
  drop_project "$project"
  project=""
}

echo "[daemons] load before: $(load); $(nproc) cores" >&2
# One node must hold the largest class at one core, a 1 GiB root and a 1 GiB home each: let
# placement overcommit the cores and the pool (Incus's is 20 GiB; btrfs quotas reserve nothing).
for daemon in incus lxd; do
  echo "[daemons] quickstart on $daemon" >&2
  scripts/quickstart --reset >&2
  # Its last lines (the node's daemon, the login) say the quickstart works on this daemon.
  COHORT_DAEMON=$daemon COHORT_CPU_OVERCOMMIT=$(((largest + 8) / $(nproc) + 1)) \
    COHORT_DISK_OVERCOMMIT=8 scripts/quickstart 2>&1 | tail -n 6 >&2
  for n in "${sizes[@]}"; do
    echo "[daemons] Cohort on $daemon, $n students" >&2
    measure_cohort "$daemon" "$n"
  done
done
bridge=cbin$$
incus network create "$bridge" ipv4.address=10.253.0.1/24 ipv4.nat=true ipv6.address=none >/dev/null
for n in "${sizes[@]}"; do
  echo "[daemons] admin loop with incus, $n students" >&2
  measure_incus_loop "$n"
done

echo "| run | students | wall (s) | host CPU per student (s) | host memory per student (MiB) | load after (1, 5, 15 min) |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo
echo "Incus $(incus query /1.0 | python3 -c 'import json, sys; print(json.load(sys.stdin)["environment"]["server_version"])'), LXD $(lxc query /1.0 | python3 -c 'import json, sys; print(json.load(sys.stdin)["environment"]["server_version"])'), $(nproc) cores, profile ${COHORT_QUICKSTART_PROFILE:-debug}."
