//! The student's way in, inside the container: the user with their keys (or password hash) and
//! optional sudo, made by one exec of a small idempotent shell script, and the readiness probe
//! that reads sshd's `SSH-` banner through the proxy port.

use std::time::{Duration, Instant};

use cohort_proto::agent::SshAccess;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use crate::instances::{InstanceError, Instances};

/// Creates or updates the user. Positional args: user, sudo (0/1), password hash (may be empty),
/// then the authorized keys. Runs as root; the first user made gets uid 1000.
const PROVISION: &str = r#"set -eu
u="$1"; sudo="$2"; pw="$3"; shift 3
if ! id -u "$u" >/dev/null 2>&1; then
  useradd -m -s /bin/bash -K UID_MIN=1000 "$u" 2>/dev/null || useradd -m -s /bin/bash "$u"
fi
g=$(id -gn "$u")
h=$(getent passwd "$u" | cut -d: -f6)
mkdir -p "$h"
if [ ! -e "$h/.profile" ] && [ -d /etc/skel ]; then cp -a /etc/skel/. "$h/"; chown -R "$u:$g" "$h"; fi
chown "$u:$g" "$h"
if [ -n "$pw" ]; then usermod -p "$pw" "$u"; fi
install -d -m 700 -o "$u" -g "$g" "$h/.ssh"
tmp="$h/.ssh/.authorized_keys.cohort"
: > "$tmp"
for k in "$@"; do printf '%s\n' "$k" >> "$tmp"; done
chown "$u:$g" "$tmp"; chmod 600 "$tmp"; mv -f "$tmp" "$h/.ssh/authorized_keys"
if [ "$sudo" = 1 ]; then
  printf '%s ALL=(ALL) NOPASSWD:ALL\n' "$u" > "/etc/sudoers.d/cohort-$u"; chmod 440 "/etc/sudoers.d/cohort-$u"
else
  rm -f "/etc/sudoers.d/cohort-$u"
fi
"#;

/// Most time the provisioning exec may take.
const PROVISION_TIMEOUT: Duration = Duration::from_secs(60);

/// True when something on `addr:port` sends an `SSH-` banner within `wait`. `0.0.0.0` and `::`
/// are probed on loopback.
pub async fn sshd_answers(addr: &str, port: u16, wait: Duration) -> bool {
    let host = match addr {
        "0.0.0.0" | "" => "127.0.0.1",
        "::" => "::1",
        other => other,
    };
    let attempt = async {
        let mut stream = TcpStream::connect((host, port)).await.ok()?;
        let mut buf = [0u8; 4];
        stream.read_exact(&mut buf).await.ok()?;
        Some(&buf == b"SSH-")
    };
    matches!(tokio::time::timeout(wait, attempt).await, Ok(Some(true)))
}

/// Probes until sshd answers or `timeout` passes. A refused or closed connection (the proxy is
/// up but sshd is not yet) is retried after a short pause.
pub async fn wait_for_sshd(addr: &str, port: u16, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(50);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        if sshd_answers(addr, port, left.min(Duration::from_secs(5))).await {
            return true;
        }
        tokio::time::sleep(pause.min(left)).await;
        pause = (pause * 2).min(Duration::from_millis(400));
    }
}

impl Instances {
    /// Runs the provisioning script in a running instance.
    pub(crate) async fn provision_user(
        &self,
        name: &str,
        ssh: &SshAccess,
    ) -> Result<(), InstanceError> {
        let mut argv = vec![
            "/bin/sh".to_string(),
            "-c".into(),
            PROVISION.into(),
            "cohort-provision".into(),
            ssh.username.clone(),
            if ssh.sudo { "1" } else { "0" }.into(),
            ssh.password_hash.clone().unwrap_or_default(),
        ];
        argv.extend(ssh.authorized_keys.iter().cloned());
        let out = self.run_command(name, argv, PROVISION_TIMEOUT).await?;
        if out.exit_code != 0 {
            return Err(InstanceError::Lxd(crate::lxd::LxdError::Operation {
                what: format!("creating user {} in {name}", ssh.username),
                message: format!(
                    "exit code {}: {}",
                    out.exit_code,
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            }));
        }
        Ok(())
    }

    /// Waits for sshd on the instance's forwarded port, bounded by `ssh_ready_timeout_s`.
    pub(crate) async fn await_sshd(
        &self,
        name: &str,
        ssh: &SshAccess,
    ) -> Result<(), InstanceError> {
        let timeout = Duration::from_secs(self.config.ssh_ready_timeout_s);
        if wait_for_sshd(&ssh.listen_address, ssh.port, timeout).await {
            Ok(())
        } else {
            Err(InstanceError::SshNotReady {
                instance: name.to_string(),
                address: format!("{}:{}", ssh.listen_address, ssh.port),
                seconds: timeout.as_secs(),
            })
        }
    }
}
