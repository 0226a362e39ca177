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
# sshd answers as soon as the container is up; no reverse DNS on a box without a network.
printf 'UseDNS no\n' >/etc/ssh/sshd_config.d/cohort.conf
passwd -l root >/dev/null
: >/etc/machine-id
rm -f /var/lib/dbus/machine-id
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/*.log
