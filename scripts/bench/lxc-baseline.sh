#!/usr/bin/env bash
# The baseline Cohort is measured against: what an admin writes today to give N students a
# container each, with plain lxc. A parallel loop (xargs -P 8) over: lxc launch, lxc exec useradd,
# push the student's key, lxc config device add ... proxy, then wait until ssh logs in.
#
#   lxc-baseline.sh PROJECT N FIRST_PORT PUBKEY_FILE PRIVKEY_FILE [--floor]
#
# With --floor it only runs `lxc launch` for the N containers (the floor no tool can beat).
# COHORT_BENCH_CLIENT=incus runs the same loop with `incus` (same verbs and flags) against Incus.
# With BENCH_BRIDGE=NAME (an LXD bridge on BENCH_PREFIX.0/24, its own address BENCH_PREFIX.1)
# each container is launched with a NIC on it (`lxc launch --network`), and the script gives
# it BENCH_PREFIX.(10+i) inside with iproute2 before anything else (the base image configures
# no network, and has no udev for systemd-networkd); the floor gets the NIC only.
# Prints the elapsed seconds on the last line. Leaves the containers for the caller to delete.
set -euo pipefail
project=$1 n=$2 first_port=$3 pub=$4 key=$5 mode=${6:-}
image=${COHORT_BENCH_IMAGE:-cohort/base}
bridge=${BENCH_BRIDGE:-} prefix=${BENCH_PREFIX:-}
export project first_port pub key image mode bridge prefix
known=$(mktemp)
export known
trap 'rm -f "$known"' EXIT

# LXD 5.0.2 now and then never answers an `lxc exec`; an admin would interrupt it and go on, so
# every lxc call gets a deadline and a call past it fails the attempt (which is then retried).
# `lxc exec` passes SIGTERM on to the command inside and keeps waiting, so the deadline ends
# with SIGKILL.
lxc_bin=$(type -P "${COHORT_BENCH_CLIENT:-lxc}")
export lxc_bin
lxc() { timeout -k 5 120 "$lxc_bin" "$@"; }
export -f lxc

# One student's container, start to ssh login; fails (non-zero) if any step does.
attempt() {
  local nic=()
  [ -z "$bridge" ] || nic=(--network "$bridge")
  step=launch
  lxc launch "$image" "$name" --project "$project" -c security.idmap.isolated=true \
    -c limits.cpu=1 -c limits.memory="${BENCH_MEMORY_MIB:-512}MiB" "${nic[@]}" -q </dev/null >/dev/null 2>&1 || return 1
  [ "$mode" = --floor ] && return 0
  if [ -n "$bridge" ]; then
    step=address
    lxc exec "$name" --project "$project" -- sh -c "ip link set dev eth0 up &&
      ip address replace $prefix.$((10 + i))/24 dev eth0 &&
      ip route replace default via $prefix.1 dev eth0" || return 1
  fi
  step=useradd
  lxc exec "$name" --project "$project" -- useradd -m -s /bin/bash "$user" || return 1
  lxc exec "$name" --project "$project" -- install -d -m 0700 -o "$user" -g "$user" \
    "/home/$user/.ssh" || return 1
  step=key
  lxc file push "$pub" "$name/home/$user/.ssh/authorized_keys" --project "$project" \
    --uid "$(lxc exec "$name" --project "$project" -- id -u "$user")" \
    --gid "$(lxc exec "$name" --project "$project" -- id -g "$user")" --mode 0600 -q || return 1
  step=proxy
  lxc config device add "$name" ssh proxy --project "$project" \
    "listen=tcp:127.0.0.1:$port" connect=tcp:127.0.0.1:22 >/dev/null || return 1
  step=ssh
  for _ in $(seq 1 300); do
    ssh -p "$port" -i "$key" -o BatchMode=yes -o IdentitiesOnly=yes -o ConnectTimeout=2 \
      -o StrictHostKeyChecking=no -o "UserKnownHostsFile=$known" -o LogLevel=ERROR \
      "$user@127.0.0.1" true </dev/null 2>/dev/null && return 0
    sleep 0.2
  done
  return 1
}
export -f attempt

# LXD 5.0.2 sometimes fails a first start racing another container's ("newuidmap ... not
# allowed") and keeps the bad map: the admin deletes the container and starts over, as this does
# (each retry counted on stderr).
one() {
  i=$1
  name=$(printf 'base-s%02d' "$i")
  user=$(printf 's%02d' "$i")
  port=$((first_port + i))
  for try in 1 2 3 4 5 6 7 8; do
    local t0=$SECONDS
    attempt && return 0
    echo "retry: $name failed at $step after $((SECONDS - t0)) s (try $try)" >&2
    lxc delete -f "$name" --project "$project" >/dev/null 2>&1 || true
    sleep "$try"
  done
  echo "$name never came up" >&2
  return 1
}
export -f one

start=$(date +%s.%N)
seq 1 "$n" | xargs -P 8 -I{} bash -c 'one {}' || true
end=$(date +%s.%N)
awk -v s="$start" -v e="$end" 'BEGIN { printf "elapsed_s %.2f\n", e - s }'
