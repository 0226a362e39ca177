#!/usr/bin/env bash
# Issue 49's first target, a whole department on one node: one course of SMALL students, then one
# of LARGE (default 30 and 300), each with 1 CPU and 256 MiB (BENCH_MEMORY_MIB), networking and
# homes, on the quickstart deployment (scripts/quickstart, release). For each class size it prints:
#   - bring-up: from `cohort course provision --wait` until every student has logged in over ssh
#     with their key, and the time per student; LARGE's per student against SMALL's (target 1.15);
#   - what the node holds with the class up: memory (MemTotal - MemAvailable) per student, PIDs,
#     inotify instances, the pool's use, the node network's addresses, the daemon's RSS;
#   - the controller's p50/p99 of `GET /api/v1/instances` (every instance, the admin's token) and
#     of the portal's class page (`/courses/CODE`, signed in as the quickstart's admin), 200
#     sequential requests each (target p99 under 100 ms);
#   - teardown: `cohort course teardown --delete` until the daemon holds none of the class
#     (target under 2 minutes);
#   - whether any student was left queued, and why (target: none);
#   - host CPU by process for each phase (bring-up, 30 s idle, teardown);
#   - the floor: bare `launch`es of the image with a NIC, then their deletes, at both sizes: how
#     much of the growth is the daemon's own.
# The node must have room for LARGE one-core, 256 MiB containers: start the quickstart with
# COHORT_CPU_OVERCOMMIT, COHORT_MEMORY_OVERCOMMIT and COHORT_DISK_OVERCOMMIT raised, as
# scripts/bench/run does.
#
#   scripts/bench/department.sh [SMALL] [LARGE]
set -euo pipefail
cd "$(dirname "$0")/../.."
small=${1:-30} large=${2:-300}
mib=${BENCH_MEMORY_MIB:-256}
state=${COHORT_QUICKSTART_DIR:-/var/lib/cohort-quickstart}
export COHORT_CONF="$state/cli/config.yml"
cohort=target/${COHORT_QUICKSTART_PROFILE:-release}/cohort
base=https://127.0.0.1:${COHORT_QUICKSTART_PORT:-8443}
ca=$state/controller/ca.crt
daemon=$(cat "$state/daemon" 2>/dev/null || echo lxd)
if [ "$daemon" = incus ]; then
  client=incus daemon_proc=incusd pool_cmd="incus storage info"
else
  client=lxc daemon_proc=lxd pool_cmd="lxc storage info"
fi
work=$(mktemp -d)
course=""
floor_project="" floor_bridge=fl$$
drop_floor() {
  if [ -n "$floor_project" ]; then
    $client list --project "$floor_project" -f csv -c n | xargs -r -P 8 -n 1 \
      $client delete -f --project "$floor_project" >/dev/null 2>&1 || true
    $client project delete "$floor_project" >/dev/null 2>&1 || true
  fi
  floor_project=""
}
cleanup() {
  drop_floor
  $client network delete "$floor_bridge" >/dev/null 2>&1 || true
  [ -z "$course" ] || "$cohort" course teardown "$course" --delete --force --quiet >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
ssh-keygen -q -t ed25519 -N "" -f "$work/key"
now() { date +%s.%N; }
elapsed() { awk -v s="$1" -v e="$2" 'BEGIN { printf "%.1f", e - s }'; }
mem_used() { awk '/^MemTotal/ { t = $2 } /^MemAvailable/ { a = $2 } END { printf "%.0f", (t - a) / 1024 }' /proc/meminfo; }
# Processes come and go while these read /proc: what vanished is not counted, and not an error.
pids() { { ls -d /proc/[0-9]* 2>/dev/null || true; } | wc -l; }
inotify() { { find /proc/[0-9]*/fd -lname 'anon_inode:inotify' 2>/dev/null || true; } | wc -l; }
pool_used() { $pool_cmd "$(awk -F'"' '/^storage_pool/ {print $2}' "$state/agent/agent.toml" 2>/dev/null || echo default)" 2>/dev/null |
  awk -F': ' '/space used/ {print $2}'; }
agent_pid=$(cat "$state/agent.pid")
controller_pid=$(cat "$state/controller.pid")
lxd_pid=$(pgrep -o -x "$daemon_proc")
source scripts/bench/cpu.sh
source scripts/bench/class.sh
daemon_rss() { awk '/VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/$(pgrep -xo "$daemon_proc")/status"; }
# p50 and p99 in ms of 200 sequential GETs of a URL with extra curl arguments, on one kept-alive
# connection as a browser or a client library holds it.
latency() {
  local url=$1; shift
  local each=()
  for _ in $(seq 1 200); do each+=(-o /dev/null "$url"); done
  curl -s -w '%{http_code} %{time_total}\n' --cacert "$ca" "$@" "${each[@]}" >"$work/latency" || true
  local bad
  bad=$(awk '$1 != 200' "$work/latency" | wc -l)
  if [ "$bad" -gt 0 ]; then
    echo "failed: $bad of 200 answered $(awk '$1 != 200 { print $1; exit }' "$work/latency")"
    return
  fi
  awk '{ print $2 * 1000 }' "$work/latency" | sort -n |
    awk '{ t[NR] = $1 } END { printf "%.1f / %.1f", t[int(NR * 0.5)], t[int(NR * 0.99)] }'
}
token=$(cat "$state/admin-token")
password=$(awk '$1 == "admin" {print $2}' "$state/portal-passwords")
csrf=csrf-$$
session=$(curl -s -o /dev/null -D - --cacert "$ca" -H "Cookie: __Host-cohort_sign_in=$csrf" \
  --data-urlencode "csrf=$csrf" --data-urlencode username=admin --data-urlencode "password=$password" \
  "$base/signin" | tr -d '\r' | sed -n 's/^[Ss]et-[Cc]ookie: \(__Host-cohort_session=[^;]\+\).*/\1/p' | head -1)
[ -n "$session" ] || { echo "Error: the portal refused the quickstart's admin password" >&2; exit 1; }

declare -A per_student floor_student
rows=() cpu_rows=()
for n in $small $large; do
  course=dept$$n$n
  bench_class "$course" cohort/base "$mib" "d$$n${n}s" "$n" "$work/key.pub" --home-size 1GiB
  sync; sleep 5
  mem0=$(mem_used) pids0=$(pids) inotify0=$(inotify)
  cpu0=$(cpu_sample)
  start=$(now)
  # It answers 2, and names each queued student with the reason, when any is left queued.
  rc=0
  "$cohort" course provision "$course" --wait --quiet 2>"$work/provision.err" || rc=$?
  [ "$rc" -eq 0 ] || [ "$rc" -eq 2 ] || { cat "$work/provision.err" >&2; exit 1; }
  queued=$(sed -n 's/^\([0-9]*\) of [0-9]* containers are queued.*/\1/p' "$work/provision.err")
  queued=${queued:-0}
  [ "$queued" -eq 0 ] || sed 's/^/queued: /' "$work/provision.err" | head -5 >&2
  "$cohort" course endpoints "$course" --format csv | tail -n +2 >"$work/endpoints"
  # Every student logs in, 16 at a time; each tries for up to 2 minutes.
  failed=$(awk -F, '{print $1, $4, $5}' "$work/endpoints" | xargs -P 16 -L 1 sh -c '
    for _ in $(seq 1 600); do
      ssh -p "$2" -i "'"$work"'/key" -o BatchMode=yes -o IdentitiesOnly=yes -o ConnectTimeout=2 \
        -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR "$0@$1" true \
        </dev/null && exit 0
      sleep 0.2
    done
    echo "$0 never logged in"' | wc -l)
  secs=$(elapsed "$start" "$(now)")
  cpu_rows+=("$(cpu_row "bring-up, $n" "$secs" "$cpu0" "$(cpu_sample)")")
  up=$(wc -l <"$work/endpoints")
  per_student[$n]=$(awk -v s="$secs" -v n="$n" 'BEGIN { printf "%.3f", s / n }')
  sleep 10 # the boot's last units settle
  # What the class costs the node idle: 30 s with nobody doing anything.
  cpu0=$(cpu_sample)
  sleep 30
  cpu_rows+=("$(cpu_row "idle 30 s, $n" 30 "$cpu0" "$(cpu_sample)")")
  mem=$(awk -v a="$mem0" -v b="$(mem_used)" -v n="$n" 'BEGIN { printf "%.1f", (b - a) / n }')
  api=$(latency "$base/api/v1/instances" -H "Authorization: Bearer $token")
  page=$(latency "$base/courses/$course" -H "Cookie: $session")
  facts="$((up)) up, $failed without a login, $queued queued; memory $mem MiB a student; PIDs +$(( $(pids) - pids0 )); inotify +$(( $(inotify) - inotify0 )); pool $(pool_used); $daemon_proc RSS $(daemon_rss) MiB"
  cpu0=$(cpu_sample)
  start=$(now)
  "$cohort" course teardown "$course" --delete --force --quiet >/dev/null
  for _ in $(seq 1 600); do
    $client list --all-projects -f csv -c n | grep -q "$course" || break
    sleep 1
  done
  teardown=$(elapsed "$start" "$(now)")
  cpu_rows+=("$(cpu_row "teardown, $n" "$teardown" "$cpu0" "$(cpu_sample)")")
  course=""
  rows+=("| $n | $secs | ${per_student[$n]} | $api | $page | $teardown | $facts |")
done

# The floor: what the daemon alone does at each size, the same number of bare `launch`es of the
# image with a NIC on a bridge of the bench's own (10.250.0.0/22, no address set inside), 8 at a
# time, then their deletes: how the daemon's own cost a container grows from SMALL to LARGE.
$client network create "$floor_bridge" ipv4.address=10.250.0.1/22 ipv4.nat=false \
  ipv6.address=none >/dev/null
for n in $small $large; do
  floor_project=dept-floor-$$-$n
  $client project create "$floor_project" -c features.images=false -c features.profiles=false >/dev/null
  cpu0=$(cpu_sample)
  start=$(now)
  seq -w 1 "$n" | xargs -P 8 -I{} $client launch cohort/base "f{}" --project "$floor_project" \
    --network "$floor_bridge" -c limits.cpu=1 -c limits.memory="${mib}MiB" >/dev/null
  secs=$(elapsed "$start" "$(now)")
  floor_student[$n]=$(awk -v s="$secs" -v n="$n" 'BEGIN { printf "%.3f", s / n }')
  cpu_rows+=("$(cpu_row "floor launch, $n" "$secs" "$cpu0" "$(cpu_sample)")")
  cpu0=$(cpu_sample)
  start=$(now)
  drop_floor
  cpu_rows+=("$(cpu_row "floor delete, $n" "$(elapsed "$start" "$(now)")" "$cpu0" "$(cpu_sample)")")
done
echo
echo "| students | bring-up (s) | a student (s) | API p50 / p99 (ms) | class page p50 / p99 (ms) | teardown (s) | the node with the class up |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo
echo "Host CPU seconds of each phase (from /proc/stat; each daemon's own and its reaped children's,"
echo "the containers' from their cgroups), per student:"
echo
echo "| phase | wall (s) | host CPU-s | per student | cores idle | $daemon_proc | agent | controller | postgres | containers | rest |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${cpu_rows[@]}"
echo
grow() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
echo "time a student at $large against $small: $(grow "${per_student[$large]}" "${per_student[$small]}") (target at most 1.15); the daemon's bare launch: $(grow "${floor_student[$large]}" "${floor_student[$small]}") (${floor_student[$small]} and ${floor_student[$large]} s a container)"
