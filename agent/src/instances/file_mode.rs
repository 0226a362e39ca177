//! A pushed file's mode as asked, setuid, setgid and sticky bits included. LXD 5.0.2 reads
//! `X-LXD-mode` with Go's `ParseInt(value, 0)`, so `4755` without a leading 0 was decimal
//! (0o11223) and the file arrived as 0223; and even written as octal its file API keeps only the
//! permission bits (`04755` arrives as 0755, seen here). So the permission bits go in the header,
//! octal with its leading 0, and the special bits are set after the push with `chmod` inside the
//! container, as the container's root: nothing a container's root could not do itself, and the
//! path is resolved inside the container as LXD resolved it.

use crate::lxd::instance_exec::InstanceExecPost;

use super::InstanceError;
use super::Instances;

/// setuid, setgid and sticky.
const SPECIAL_BITS: u32 = 0o7000;

/// How long the `chmod` may take.
const CHMOD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The `X-LXD-mode` header for `mode`: its permission bits, octal with a leading 0.
pub(super) fn lxd_mode_header(mode: u32) -> String {
    format!("0{:o}", mode & 0o777)
}

impl Instances {
    /// Refuses (409), before anything is written, special bits for an instance that is not
    /// running: they are set with a command inside it.
    pub(super) async fn check_special_bits(
        &self,
        name: &str,
        mode: u32,
    ) -> Result<(), InstanceError> {
        if mode & SPECIAL_BITS == 0 {
            return Ok(());
        }
        let running = self
            .lxd_instance(name)
            .await?
            .is_some_and(|lx| lx.status == "Running");
        if !running {
            return Err(InstanceError::Conflict(format!(
                "mode {mode:04o} has setuid, setgid or sticky bits, which are set only while \
                 {name} runs: start it first"
            )));
        }
        Ok(())
    }

    /// Gives the file pushed to `path` its whole `mode` when that has special bits.
    pub(super) async fn apply_special_bits(
        &self,
        name: &str,
        path: &str,
        mode: u32,
    ) -> Result<(), InstanceError> {
        if mode & SPECIAL_BITS == 0 {
            return Ok(());
        }
        let command = vec![
            "chmod".into(),
            format!("{mode:o}"),
            "--".into(),
            path.into(),
        ];
        let body = InstanceExecPost::recorded(command, Default::default());
        let out = self.exec_body(name, &body, CHMOD_TIMEOUT).await?;
        if out.exit_code != 0 {
            return Err(InstanceError::Internal(format!(
                "chmod {mode:o} {path} in {name} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::lxd_mode_header;

    #[test]
    fn the_header_is_octal_with_its_leading_zero() {
        assert_eq!(lxd_mode_header(0o644), "0644");
        assert_eq!(lxd_mode_header(0o4755), "0755");
        assert_eq!(lxd_mode_header(0), "00");
    }
}
