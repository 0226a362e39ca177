#!/usr/bin/env bash
# Host memory per student for SSH: the PSS of everything a student's SSH forward adds on the
# host, with LXD's classic proxy (one `lxd forkproxy` per container, Cohort's fallback) against
# the NAT proxy (`nat=true`: a DNAT rule in the kernel, Cohort's default). N containers on a
# bridge of the bench's own (10.251.0.0/24), each given first the one forward and then the
# other; each forward must answer with sshd's banner before it is measured. Packets go only to
# 127.0.0.1 and the bench's bridge.
#
#   ssh-memory.sh [N]        (default 10; each container's first start takes seconds to a
#                            minute on a busy host: give a wrapping timeout room to clean up)
#
# Prints one table: forwards, processes, total PSS and PSS per student for each mode, and the
# ratio. Everything it made (project, containers, bridge) goes on exit.
set -euo pipefail
n=${1:-10}
export LXD_DIR=${LXD_DIR:-/var/lib/lxd}
project=cohort-bench-ssh-$$
bridge=cbssh$$
gateway=10.251.0.1
[ "$n" -ge 1 ] && [ "$n" -le 60 ] || { echo "Error: N must be 1 to 60" >&2; exit 2; }

cleanup() {
  for name in $(lxc list --project "$project" -f csv -c n 2>/dev/null); do
    lxc delete -f --project "$project" "$name" >/dev/null 2>&1 || true
  done
  lxc project delete "$project" >/dev/null 2>&1 || true
  lxc network delete "$bridge" >/dev/null 2>&1 || true
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

# Every cohort-agent and test on this daemon creates and starts under this lock (LXD 5.0.2
# gives a container started beside a half-made one a bad idmap); the bench does too.
tag=$(printf %s "$LXD_DIR/unix.socket" | sha256sum | cut -c1-16)
lock=/tmp/cohort-lxd-start-$tag.lock

lxc network create "$bridge" ipv4.address=$gateway/24 ipv4.nat=true ipv6.address=none >/dev/null
lxc project create "$project" -c features.images=false -c features.profiles=false >/dev/null
for i in $(seq 1 "$n"); do
  name=s$i
  flock "$lock" lxc init cohort/base "$name" --project "$project" -s cohort \
    -c security.idmap.isolated=true -c limits.memory=256MiB -q >/dev/null 2>&1
  lxc config device add "$name" eth0 nic --project "$project" network="$bridge" \
    ipv4.address=10.251.0.$((i + 1)) >/dev/null
  flock "$lock" lxc start "$name" --project "$project" >/dev/null
  # The image configures no address: give it one, as Cohort's agent does before the boot.
  lxc exec "$name" --project "$project" -- sh -c \
    "ip link set dev eth0 up && ip address replace 10.251.0.$((i + 1))/24 dev eth0"
done

# Waits until every forward answers with sshd's banner (60 s at most each).
answers() {
  local host=$1 port=$2
  for _ in $(seq 1 300); do
    if banner=$(timeout 2 bash -c "exec 3<>/dev/tcp/$host/$port && head -c 4 <&3" 2>/dev/null) &&
      [ "$banner" = SSH- ]; then
      return 0
    fi
    sleep 0.2
  done
  echo "Error: nothing answers on $host:$port" >&2
  return 1
}

# The forkproxy processes of the bench's forwards (by their listen ports, the bench's own) and
# their PSS in KiB.
forkproxies() {
  local i
  for i in $(seq 1 "$n"); do
    pgrep -f "forkproxy .*:$((first_port + i)) " || true
  done
}
pss_kib() {
  local total=0 pid kib
  for pid in $(forkproxies); do
    kib=$(awk '/^Pss:/ {print $2}' "/proc/$pid/smaps_rollup" 2>/dev/null || echo 0)
    total=$((total + kib))
  done
  echo "$total"
}

measure() {
  local mode=$1 i name port
  for i in $(seq 1 "$n"); do
    name=s$i port=$((first_port + i))
    lxc config device remove "$name" ssh --project "$project" >/dev/null 2>&1 || true
    if [ "$mode" = forkproxy ]; then
      lxc config device add "$name" ssh proxy --project "$project" bind=host \
        "listen=tcp:127.0.0.1:$port" connect=tcp:127.0.0.1:22 >/dev/null
    else
      lxc config device add "$name" ssh proxy --project "$project" nat=true \
        "listen=tcp:$gateway:$port" "connect=tcp:10.251.0.$((i + 1)):22" >/dev/null
    fi
  done
  for i in $(seq 1 "$n"); do
    if [ "$mode" = forkproxy ]; then answers 127.0.0.1 $((first_port + i)); else answers $gateway $((first_port + i)); fi
  done
  local procs kib
  procs=$(forkproxies | wc -l)
  kib=$(pss_kib)
  awk -v m="$mode" -v n="$n" -v p="$procs" -v k="$kib" \
    'BEGIN { printf "| %s | %d | %d | %.1f | %.2f |\n", m, n, p, k / 1024, k / 1024 / n }'
  echo "$kib" >"/tmp/$project-$mode"
}

echo "| SSH forward | students | forkproxy processes | PSS total (MiB) | PSS per student (MiB) |"
echo "|---|---|---|---|---|"
measure forkproxy
measure nat
fork=$(cat "/tmp/$project-forkproxy") nat=$(cat "/tmp/$project-nat")
rm -f "/tmp/$project-forkproxy" "/tmp/$project-nat"
echo
awk -v f="$fork" -v t="$nat" -v n="$n" 'BEGIN {
  printf "NAT against forkproxy: %.2f against %.2f MiB per student (target: at most 0.1)\n",
    t / 1024 / n, f / 1024 / n }'
