# Runs inside the image's rootfs (chroot) after debootstrap.
set -eu
# Host keys are made per container on first boot, never shared by every clone of the image.
rm -f /etc/ssh/ssh_host_*
cat >/etc/systemd/system/cohort-ssh-host-keys.service <<'UNIT'
[Unit]
Description=Generate this container's own SSH host keys
Before=ssh.service
ConditionPathExists=!/etc/ssh/ssh_host_ed25519_key

[Service]
Type=oneshot
ExecStart=/usr/bin/ssh-keygen -A

[Install]
WantedBy=multi-user.target
UNIT
ln -sf /etc/systemd/system/cohort-ssh-host-keys.service \
  /etc/systemd/system/multi-user.target.wants/cohort-ssh-host-keys.service
# Containers have no network interface of their own; nothing should wait for one.
for unit in systemd-networkd-wait-online.service systemd-timesyncd.service \
    apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer \
    systemd-binfmt.service proc-sys-fs-binfmt_misc.automount; do
  ln -sf /dev/null "/etc/systemd/system/$unit"
done
# A lean boot: what a container's boot spends CPU on and no student needs (profiled per unit,
# BENCHMARKS.md "A leaner boot"). Each path made here is listed in /usr/share/cohort/lean-boot, so
# an admin sees what was masked, and `scripts/bench/boot.sh` can make the unmasked image beside it.
lean=/usr/share/cohort/lean-boot
mkdir -p /usr/share/cohort /etc/systemd/system-generators /etc/systemd/journald.conf.d
: >"$lean"
made() { printf '%s\n' "$1" >>"$lean"; }
# Generators for what a container never has: encrypted, integrity and verity volumes, GPT
# partitions to discover, hibernation to resume, an offline update, a kernel command line of its
# own. Each is a fork and exec of PID 1 on every boot. fstab, getty, rc.local and the SysV scripts
# a package may bring keep theirs.
for g in cryptsetup gpt-auto hibernate-resume integritysetup veritysetup system-update debug run; do
  ln -sf /dev/null "/etc/systemd/system-generators/systemd-$g-generator"
  made "/etc/systemd/system-generators/systemd-$g-generator"
done
# Units with nothing to do in a container: ext4 scrub snapshots (LVM), kernel modules it may not
# load (modules-load and the five modprobe@ instances the boot pulls in), and a remount of a root
# the daemon mounted.
for unit in e2scrub_reap.service systemd-modules-load.service systemd-remount-fs.service \
    modprobe@.service; do
  ln -sf /dev/null "/etc/systemd/system/$unit"
  made "/etc/systemd/system/$unit"
done
# sshd checks its configuration once, when it starts (a bad one still fails the unit, with the
# same message), not in a separate `sshd -t` first; `systemctl reload ssh` still checks first.
mkdir -p /etc/systemd/system/ssh.service.d
printf '[Service]\nExecStartPre=\n' >/etc/systemd/system/ssh.service.d/cohort-boot.conf
made /etc/systemd/system/ssh.service.d/cohort-boot.conf
# The journal stays (persistent, as Debian keeps it) but bounded, so a chatty unit cannot fill a
# student's root disk.
printf '[Journal]\nSystemMaxUse=64M\nRuntimeMaxUse=16M\n' >/etc/systemd/journald.conf.d/cohort.conf
made /etc/systemd/journald.conf.d/cohort.conf
# sshd answers as soon as the container is up; no reverse DNS on a box without a network.
printf 'UseDNS no\n' >/etc/ssh/sshd_config.d/cohort.conf
passwd -l root >/dev/null
: >/etc/machine-id
rm -f /var/lib/dbus/machine-id
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/*.log
# Last, after every change under /usr: /etc and /var are as new as /usr, so sysusers and the other
# ConditionNeedsUpdate units run again only after an upgrade touches /usr (Debian has no
# systemd-update-done to write these).
for d in /etc /var; do
  printf 'TIMESTAMP_NSEC=%s\n' "$(date +%s%N)" >"$d/.updated"
  made "$d/.updated"
done
