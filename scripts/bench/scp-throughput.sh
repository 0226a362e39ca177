#!/usr/bin/env bash
# `scp` of 1 GiB into a container through a student's SSH forward: the NAT proxy (`nat=true`, a
# DNAT rule, Cohort's default on a node network) against LXD's classic proxy (one `lxd
# forkproxy` copying every byte in user space, Cohort's fallback). One container on a bridge of
# the bench's own (10.253.0.0/24) with both forwards at once, so only the path differs; the
# file (random, from /dev/shm) goes to /dev/null inside, so the container's disk is not what is
# measured. ROUNDS alternating copies of each; the best of each is kept (on a shared machine the
# worst is other people's load). It also gives the CPU time the forkproxy process spent (it
# copies every byte through user space; the DNAT rule's work is the kernel's, in softirq, and
# not attributed to any process). Packets go only to 127.0.0.1 and the bench's bridge.
#
#   scp-throughput.sh [MIB] [ROUNDS]     (default 1024 MiB, 3 rounds)
#
# Prints one table (seconds and MB/s of each copy, best of each mode) and the ratio. Everything
# it made (project, container, bridge, file, key) goes on exit.
set -euo pipefail
mib=${1:-1024} rounds=${2:-3}
export LXD_DIR=${LXD_DIR:-/var/lib/lxd}
project=cohort-bench-scp-$$
bridge=cbscp$$
gateway=10.253.0.1 address=10.253.0.2
work=$(mktemp -d)
data=/dev/shm/cohort-bench-scp-$$
[ "$mib" -ge 1 ] && [ "$rounds" -ge 1 ] && [ "$rounds" -le 5 ] ||
  { echo "Error: MIB must be at least 1 and ROUNDS 1 to 5" >&2; exit 2; }

cleanup() {
  lxc delete -f --project "$project" s1 >/dev/null 2>&1 || true
  lxc project delete "$project" >/dev/null 2>&1 || true
  lxc network delete "$bridge" >/dev/null 2>&1 || true
  rm -rf "$work" "$data"
}
trap cleanup EXIT

# Ports: a block of 64 claimed like the tests claim theirs (tests/src/ports.rs), held until exit.
read -r eph_low eph_high </proc/sys/net/ipv4/ip_local_port_range
mkdir -p /tmp/cohort-test-ports
first_port=
for block in $(seq 0 599); do
  first=$((20000 + block * 64))
  [ "$first" -le "$eph_high" ] && [ "$eph_low" -lt $((first + 64)) ] && continue
  exec 9>"/tmp/cohort-test-ports/block-$block"
  if flock -n 9; then first_port=$first; break; fi
done
[ -n "$first_port" ] || { echo "Error: no free port block" >&2; exit 1; }
nat_port=$((first_port + 1)) fork_port=$((first_port + 2))

tag=$(printf %s "$LXD_DIR/unix.socket" | sha256sum | cut -c1-16)
lock=/tmp/cohort-lxd-start-$tag.lock
lxc network create "$bridge" ipv4.address=$gateway/24 ipv4.nat=true ipv6.address=none >/dev/null
lxc project create "$project" -c features.images=false -c features.profiles=false >/dev/null
flock "$lock" lxc init cohort/base s1 --project "$project" -s cohort \
  -c security.idmap.isolated=true -c limits.memory=512MiB -q >/dev/null 2>&1
lxc config device add s1 eth0 nic --project "$project" network="$bridge" \
  ipv4.address=$address >/dev/null
flock "$lock" lxc start s1 --project "$project" >/dev/null
lxc exec s1 --project "$project" -- sh -c \
  "ip link set dev eth0 up && ip address replace $address/24 dev eth0 && useradd -m -s /bin/bash bench &&
   install -d -m 0700 -o bench -g bench /home/bench/.ssh"
ssh-keygen -q -t ed25519 -N '' -f "$work/key"
lxc file push "$work/key.pub" s1/home/bench/.ssh/authorized_keys --project "$project" \
  --uid "$(lxc exec s1 --project "$project" -- id -u bench)" \
  --gid "$(lxc exec s1 --project "$project" -- id -g bench)" --mode 0600 -q
lxc config device add s1 ssh-nat proxy --project "$project" nat=true \
  "listen=tcp:$gateway:$nat_port" "connect=tcp:$address:22" >/dev/null
lxc config device add s1 ssh-fork proxy --project "$project" bind=host \
  "listen=tcp:127.0.0.1:$fork_port" connect=tcp:127.0.0.1:22 >/dev/null
head -c "$((mib * 1024 * 1024))" /dev/urandom >"$data"

opts=(-i "$work/key" -o BatchMode=yes -o IdentitiesOnly=yes -o ConnectTimeout=5
  -o StrictHostKeyChecking=no -o "UserKnownHostsFile=$work/known" -o LogLevel=ERROR)
# Waits (60 s at most) until a login through the forward works.
up() {
  for _ in $(seq 1 300); do
    ssh -p "$2" "${opts[@]}" "bench@$1" true </dev/null 2>/dev/null && return 0
    sleep 0.2
  done
  echo "Error: no login through $1:$2" >&2
  return 1
}
up "$gateway" "$nat_port"
up 127.0.0.1 "$fork_port"

# One copy; prints its seconds.
copy() {
  local start end
  start=$(date +%s.%N)
  # -O: the scp protocol, which writes to /dev/null as to a file (SFTP fails setting its mode).
  timeout 600 scp -O -q -P "$2" "${opts[@]}" "$data" "bench@$1:/dev/null" || return 1
  end=$(date +%s.%N)
  awk -v s="$start" -v e="$end" 'BEGIN { printf "%.2f", e - s }'
}
# CPU seconds (user + system) the forkproxy of the forkproxy forward has used so far.
fork_cpu() {
  local pid
  pid=$(pgrep -f "forkproxy .*:$fork_port " | head -n 1)
  awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$pid/stat"
}
mbs() { awk -v m="$mib" -v s="$1" 'BEGIN { printf "%.0f", m * 1048576 / 1e6 / s }'; }

echo "| SSH forward | round | seconds | MB/s |"
echo "|---|---|---|---|"
best_nat=999999 best_fork=999999 cpu_before=$(fork_cpu)
for r in $(seq 1 "$rounds"); do
  s=$(copy "$gateway" "$nat_port")
  echo "| nat | $r | $s | $(mbs "$s") |"
  best_nat=$(awk -v a="$best_nat" -v b="$s" 'BEGIN { print (b < a) ? b : a }')
  s=$(copy 127.0.0.1 "$fork_port")
  echo "| forkproxy | $r | $s | $(mbs "$s") |"
  best_fork=$(awk -v a="$best_fork" -v b="$s" 'BEGIN { print (b < a) ? b : a }')
done
cpu_after=$(fork_cpu)
echo
awk -v n="$best_nat" -v f="$best_fork" -v m="$mib" -v r="$rounds" -v a="$cpu_before" \
  -v b="$cpu_after" 'BEGIN {
  printf "scp of %d MiB: NAT %.0f MB/s against forkproxy %.0f MB/s, ratio %.2f\n",
    m, m * 1048576 / 1e6 / n, m * 1048576 / 1e6 / f, f / n
  printf "forkproxy CPU: %.2f s per GiB copied (user and system); NAT: no process\n",
    (b - a) / (m * r / 1024) }'
