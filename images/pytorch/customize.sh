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
# PyTorch, torchvision, JupyterLab and its Python kernel in one virtual environment, from the
# wheels images/build fetched from PyPI (requirements.txt, pinned); no cache kept in the image.
# The kernel is this environment's Python, so a notebook imports torch as a shell does.
python3 -m venv /opt/jupyter
/opt/jupyter/bin/pip install --no-cache-dir --disable-pip-version-check -q \
  --no-index --find-links /run/cohort-wheels torch torchvision jupyterlab ipykernel
# A login shell (ssh) finds the environment's python, pip and jupyter first.
cat >/etc/profile.d/cohort-pytorch.sh <<'PROFILE'
PATH=/opt/jupyter/bin:$PATH
export PATH
PROFILE
# Kernel culling: a kernel idle for an hour (no cell running, whether or not a browser tab is
# still open) is shut down, checked every 5 minutes, so a forgotten notebook gives its GPU memory
# back to the container's cap and the card.
mkdir -p /opt/jupyter/etc/jupyter
cat >/opt/jupyter/etc/jupyter/jupyter_server_config.json <<'CONFIG'
{
  "MappingKernelManager": {
    "cull_idle_timeout": 3600,
    "cull_interval": 300,
    "cull_connected": true,
    "cull_busy": false
  }
}
CONFIG
mkdir -p /usr/local/libexec
cat >/usr/local/libexec/cohort-jupyter <<'SCRIPT'
#!/bin/sh
# Starts JupyterLab as the container's student (the first user with a home under /home, made by
# Cohort after the container's first boot), on the container's own address only, port 8888,
# under /jupyter/<container name>/, the path the portal proxies. No token or password of its
# own: the portal's sign-in is the only way in, and nothing but the node's agent reaches this
# address (the bridge isolates containers from each other). Exits 1 until the student exists;
# systemd tries again.
set -eu
user=$(awk -F: '$3 >= 1000 && $3 < 60000 && $6 ~ /^\/home\// { print $1; exit }' /etc/passwd)
[ -n "$user" ] || { echo "no student user yet" >&2; exit 1; }
addr=$(ip -4 -o addr show scope global | awk '{ split($4, a, "/"); print a[1]; exit }')
[ -n "$addr" ] || { echo "no IPv4 address yet" >&2; exit 1; }
home=$(getent passwd "$user" | cut -d: -f6)
cd "$home"
exec runuser -u "$user" -- env HOME="$home" SHELL=/bin/bash \
  /opt/jupyter/bin/jupyter lab --no-browser --ip="$addr" --port=8888 \
  --ServerApp.port_retries=0 \
  --ServerApp.base_url="/jupyter/$(hostname)/" \
  --ServerApp.root_dir="$home" \
  --IdentityProvider.token= --ServerApp.password= \
  --ServerApp.allow_remote_access=True \
  --ServerApp.terminado_settings="shell_command=['/bin/bash','-l']" \
  --LabApp.news_url=None --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate
SCRIPT
chmod 0755 /usr/local/libexec/cohort-jupyter
cat >/etc/systemd/system/cohort-jupyter.service <<'UNIT'
[Unit]
Description=JupyterLab for this container's student (reached through the Cohort portal)
After=network.target
StartLimitIntervalSec=0

[Service]
ExecStart=/usr/local/libexec/cohort-jupyter
Restart=always
RestartSec=3

[Install]
WantedBy=multi-user.target
UNIT
ln -sf /etc/systemd/system/cohort-jupyter.service \
  /etc/systemd/system/multi-user.target.wants/cohort-jupyter.service
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/*.log
