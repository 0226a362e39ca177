# Sourced by scripts/bench/bringup.sh and department.sh: where a phase's host CPU went. The caller
# sets lxd_pid, agent_pid and controller_pid (the node's daemon, Cohort's two) and n (students).
# Host CPU, as "busy idle lxd agent controller postgres containers" in seconds since boot: the
# host's from /proc/stat; a daemon's is its own and its reaped children's ticks (LXD's forkstart,
# PostgreSQL's exited backends); LXD's includes its monitors (lxc.monitor.* cgroups), and the
# containers' is every lxc.payload.* cgroup (their init, systemd, sshd, the baseline's useradd).
# A phase's figures are the difference of two samples; its containers are still there at the end.
tck=$(getconf CLK_TCK)
ticks() { for p in "$@"; do sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null; done |
  awk '{ t += $12 + $13 + $14 + $15 } END { print t + 0 }'; }
cgroup_ns() { cat /sys/fs/cgroup/cpuacct/"$1"*/cpuacct.usage 2>/dev/null |
  awk '{ t += $1 } END { print t + 0 }'; }
cpu_sample() {
  local host lxd agent controller pg payload monitor
  host=$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6; exit }' /proc/stat)
  lxd=$(ticks "$lxd_pid"); agent=$(ticks "$agent_pid"); controller=$(ticks "$controller_pid")
  pg=$(ticks $(pgrep -x postgres))
  payload=$(cgroup_ns lxc.payload.); monitor=$(cgroup_ns lxc.monitor.)
  awk -v h="$host" -v l="$lxd" -v a="$agent" -v c="$controller" -v p="$pg" -v y="$payload" \
    -v m="$monitor" -v t="$tck" 'BEGIN { split(h, hh, " ");
      printf "%.2f %.2f %.2f %.2f %.2f %.2f %.2f\n", hh[1] / t, hh[2] / t, l / t + m / 1e9,
        a / t, c / t, p / t, y / 1e9 }'
}
# One row of the CPU table: phase name, wall seconds, the samples before and after.
cpu_row() {
  awk -v name="$1" -v wall="$2" -v n="$n" -v a="$3" -v b="$4" 'BEGIN {
    split(a, x, " "); split(b, y, " "); for (i = 1; i <= 7; i++) d[i] = y[i] - x[i];
    rest = d[1] - d[3] - d[4] - d[5] - d[6] - d[7]; if (rest < 0) rest = 0;
    printf "| %s | %s | %.1f | %.1f | %.0f %% | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |\n",
      name, wall, d[1], d[1] / n, 100 * d[2] / (d[1] + d[2]), d[3], d[4], d[5], d[6], d[7], rest }'
}

