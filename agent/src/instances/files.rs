//! File push and pull through LXD's file API, with owner and mode carried in headers.
//!
//! LXD 5.0.2 serves an instance's files through a helper process (`lxd forkfile`) it starts for
//! that instance on demand, listening on `forkfile.sock` in the instance's log directory, and
//! which exits after 10 to 15 s without work. LXD names the socket `/proc/self/fd/N/forkfile.sock`,
//! N being a directory it opened for the call and closed right after; when a helper exits, LXD
//! unlinks that path, which by then may name another instance's new socket (canonical/lxd#18403).
//! That call fails with `dial unix /proc/self/fd/N/forkfile.sock: connect: no such file or
//! directory`. Worse, while a helper of the failed instance is still alive, each new call's fresh
//! socket is unlinked the same way when that helper exits: measured here, calls retried every
//! second failed for five minutes, and four retries spread over 15 s all failed. Once no helper of
//! the instance is left, the next call works. So a call that fails this way waits for that, then
//! tries again.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::InstanceError;
use hyper::header::HeaderMap;

use super::Instances;
use crate::lxd::daemon::FileHeader;
use crate::lxd::{Daemon, LxdError, RawStream};

/// Calls in all for one file operation that keeps meeting the helper race.
const HELPER_RACE_TRIES: u32 = 3;
/// The longest a helper lives without work (10 to 15 s in LXD 5.0.2), with a margin: what the
/// agent waits when it cannot see LXD's helpers, and the most it waits when it can.
const HELPER_IDLE_LIFE: Duration = Duration::from_secs(30);

/// Whether LXD failed a file call because its helper's socket was gone or cut (see the module).
pub(crate) fn is_helper_race(e: &LxdError) -> bool {
    e.lxd_message().is_some_and(|m| m.contains("forkfile.sock"))
}

/// Runs `call` until it succeeds, fails another way, or has met the helper race
/// [`HELPER_RACE_TRIES`] times; `settle` runs before each new try. Returns the outcome and the
/// number of tries made again.
async fn retry_helper_races<T, C, CF, S, SF>(
    mut call: C,
    mut settle: S,
) -> (Result<T, LxdError>, u32)
where
    C: FnMut() -> CF,
    CF: Future<Output = Result<T, LxdError>>,
    S: FnMut(&LxdError) -> SF,
    SF: Future<Output = ()>,
{
    let mut again = 0;
    loop {
        match call().await {
            Err(e) if is_helper_race(&e) && again + 1 < HELPER_RACE_TRIES => {
                settle(&e).await;
                again += 1;
            }
            outcome => return (outcome, again),
        }
    }
}

/// Whether the pid file names a live `lxd forkfile` process (a stale file from an earlier LXD
/// may name a pid some other process has since taken).
fn helper_alive(pid_file: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(pid_file) else {
        return false;
    };
    let Ok(pid) = text.trim().parse::<u32>() else {
        return false;
    };
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|cmdline| cmdline.split(|b| *b == 0).any(|arg| arg == b"forkfile"))
}

/// A file read from an instance.
pub struct FileContent {
    pub bytes: Bytes,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

/// A file being read from an instance: its owner and mode, and LXD's answer to stream on.
pub struct FileStream {
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub body: RawStream,
}

/// LXD's 404 for a file: the path is missing (the instance was found to serve the call).
fn missing_path(name: &str, path: &str, e: LxdError) -> InstanceError {
    if e.is_not_found() {
        InstanceError::NotFound {
            field: Some("path".into()),
            message: format!(
                "{path} not found in {name} (LXD: {})",
                e.lxd_message().unwrap_or_default()
            ),
        }
    } else {
        e.into()
    }
}

/// Mode, uid and gid from the daemon's file headers; a directory is not a file to pull.
fn file_meta(
    daemon: &Daemon,
    headers: &HeaderMap,
    path: &str,
) -> Result<(u32, u32, u32), InstanceError> {
    let header = |k: FileHeader| {
        headers
            .get(daemon.file_header(k))
            .and_then(|v| v.to_str().ok())
    };
    if header(FileHeader::Type) == Some("directory") {
        return Err(InstanceError::invalid(
            "path",
            format!("{path} is a directory"),
        ));
    }
    let num = |k: FileHeader, radix: u32| {
        header(k)
            .and_then(|v| u32::from_str_radix(v.trim_start_matches("0o"), radix).ok())
            .unwrap_or(0)
    };
    Ok((
        num(FileHeader::Mode, 8),
        num(FileHeader::Uid, 10),
        num(FileHeader::Gid, 10),
    ))
}

fn check_file_path(path: &str) -> Result<(), InstanceError> {
    if !path.starts_with('/') || path.contains('\0') {
        return Err(InstanceError::invalid("path", "must be an absolute path"));
    }
    Ok(())
}

impl Instances {
    pub async fn pull_file(&self, name: &str, path: &str) -> Result<FileContent, InstanceError> {
        super::check_name(name)?;
        check_file_path(path)?;
        let raw = self
            .past_helper_races(name, || self.lxd.get_instance_file(name, path))
            .await
            .map_err(|e| missing_path(name, path, e))?;
        let (mode, uid, gid) = file_meta(&self.daemon, &raw.headers, path)?;
        Ok(FileContent {
            mode,
            uid,
            gid,
            bytes: raw.bytes,
        })
    }

    /// The owner (uid, gid) of `path` in `name`, which may be a directory.
    pub(crate) async fn path_owner(
        &self,
        name: &str,
        path: &str,
    ) -> Result<(u32, u32), InstanceError> {
        check_file_path(path)?;
        let raw = self
            .past_helper_races(name, || self.lxd.get_instance_file(name, path))
            .await
            .map_err(|e| missing_path(name, path, e))?;
        let id = |k| {
            raw.headers
                .get(self.daemon.file_header(k))
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u32>().ok())
        };
        match (id(FileHeader::Uid), id(FileHeader::Gid)) {
            (Some(uid), Some(gid)) => Ok((uid, gid)),
            _ => Err(InstanceError::Internal(format!(
                "the daemon did not say who owns {path} in {name}"
            ))),
        }
    }

    /// A file as LXD sends it, unread, if LXD declares it no longer than `limit` bytes.
    pub async fn pull_file_stream(
        &self,
        name: &str,
        path: &str,
        limit: u64,
    ) -> Result<FileStream, InstanceError> {
        super::check_name(name)?;
        check_file_path(path)?;
        let raw = self
            .past_helper_races(name, || self.lxd.get_instance_file_stream(name, path))
            .await
            .map_err(|e| missing_path(name, path, e))?;
        let (mode, uid, gid) = file_meta(&self.daemon, &raw.headers, path)?;
        if let Some(size) = raw.length().filter(|size| *size > limit) {
            return Err(InstanceError::TooLarge {
                field: "path".into(),
                size,
                limit,
            });
        }
        Ok(FileStream {
            mode,
            uid,
            gid,
            body: raw,
        })
    }

    pub async fn push_file(
        &self,
        name: &str,
        path: &str,
        bytes: Bytes,
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> Result<(), InstanceError> {
        super::check_name(name)?;
        if mode > 0o7777 {
            return Err(InstanceError::invalid("mode", "must be at most 07777"));
        }
        check_file_path(path)?;
        self.check_special_bits(name, mode).await?;
        let h = |k| self.daemon.file_header(k);
        let headers = [
            ("Content-Type", "application/octet-stream".to_string()),
            (h(FileHeader::Type), "file".to_string()),
            (h(FileHeader::Write), "overwrite".to_string()),
            (h(FileHeader::Mode), super::file_mode::lxd_mode_header(mode)),
            (h(FileHeader::Uid), uid.to_string()),
            (h(FileHeader::Gid), gid.to_string()),
        ];
        let pushed = self
            .past_helper_races(name, || {
                self.lxd
                    .create_instance_file(name, path, &headers, bytes.clone())
            })
            .await;
        match pushed {
            Ok(_) => {}
            // LXD answers a bare 404 both for a missing instance and for a missing directory
            // above the file: only the first is "instance not found".
            Err(e) if e.is_not_found() => {
                return match self.lxd.get_instance_current(name).await {
                    Ok(_) => Err(InstanceError::NotFound {
                        field: Some("path".into()),
                        message: format!("the directory of {path} does not exist in {name}"),
                    }),
                    Err(_) => Err(InstanceError::instance_missing(name, &e)),
                }
            }
            Err(e) => return Err(e.into()),
        }
        self.apply_special_bits(name, path, mode).await
    }

    /// Makes the directory `path` (mode 0755, owned by the container's root) unless it is there.
    pub(crate) async fn push_directory(&self, name: &str, path: &str) -> Result<(), InstanceError> {
        check_file_path(path)?;
        let h = |k| self.daemon.file_header(k);
        let headers = [
            (h(FileHeader::Type), "directory".to_string()),
            (h(FileHeader::Mode), "0755".to_string()),
            (h(FileHeader::Uid), "0".to_string()),
            (h(FileHeader::Gid), "0".to_string()),
        ];
        let made = self
            .past_helper_races(name, || {
                self.lxd
                    .create_instance_file(name, path, &headers, Bytes::new())
            })
            .await;
        match made {
            Ok(_) => Ok(()),
            Err(e)
                if e.lxd_message()
                    .is_some_and(|m| m.contains("exists") || m.contains("already")) =>
            {
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// A file call, tried again after the helper race (see the module) once the instance's
    /// helper is gone.
    async fn past_helper_races<T, C, CF>(&self, name: &str, call: C) -> Result<T, LxdError>
    where
        C: FnMut() -> CF,
        CF: Future<Output = Result<T, LxdError>>,
    {
        let (outcome, again) = retry_helper_races(call, |e| {
            tracing::info!(
                instance = name,
                error = %e,
                "LXD's file helper lost its socket; trying again once the helper has exited"
            );
            self.file_helper_gone(name)
        })
        .await;
        self.record_file_helper_retries(again);
        outcome
    }

    /// Waits until no file helper of `name` is alive: its pid file gone or naming no helper,
    /// checked every quarter second for at most [`HELPER_IDLE_LIFE`]. Where LXD keeps no log
    /// directory the agent can see, waits that long.
    async fn file_helper_gone(&self, name: &str) {
        let Some(pid_file) = self.file_helper_pid_file(name) else {
            tokio::time::sleep(HELPER_IDLE_LIFE).await;
            return;
        };
        let deadline = Instant::now() + HELPER_IDLE_LIFE;
        while helper_alive(&pid_file) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// The daemon's pid file for the instance's helper, in its log directory (`logs/` beside the
    /// socket, or the packaged default: see [`crate::lxd::Daemon::instance_log_dirs`]), when that
    /// directory exists.
    fn file_helper_pid_file(&self, name: &str) -> Option<PathBuf> {
        let local = self.config.lxd_local_name(name);
        self.daemon
            .instance_log_dirs(&self.config.lxd_dir())
            .into_iter()
            .map(|logs| logs.join(&local))
            .find(|dir| dir.is_dir())
            .map(|dir| dir.join("forkfile.pid"))
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::process::{Command, Stdio};

    use super::*;

    /// LXD's words when the helper's socket was unlinked under it (from the flake in CI).
    fn race() -> LxdError {
        LxdError::Api {
            what: "GET /1.0/instances/fp-s11/files?path=%2Fetc%2Fssh%2Fssh_host_ed25519_key.pub"
                .into(),
            status: 500,
            message:
                "dial unix /proc/self/fd/850/forkfile.sock: connect: no such file or directory"
                    .into(),
        }
    }

    fn other() -> LxdError {
        LxdError::Api {
            what: "GET /1.0/instances/a/files".into(),
            status: 500,
            message: "Failed to mount: no space left on device".into(),
        }
    }

    #[test]
    fn only_the_helpers_socket_counts_as_the_race() {
        assert!(is_helper_race(&race()));
        let reset = LxdError::Api {
            what: "POST /1.0/instances/a/files".into(),
            status: 500,
            message: "error receiving version packet from server: read unix \
                      @->/proc/self/fd/22/forkfile.sock: read: connection reset by peer"
                .into(),
        };
        assert!(is_helper_race(&reset));
        assert!(!is_helper_race(&other()));
        let missing = LxdError::Api {
            what: "GET /1.0/instances/a/files".into(),
            status: 404,
            message: "Not Found".into(),
        };
        assert!(!is_helper_race(&missing));
        let unreachable = LxdError::Unreachable {
            socket: "/var/lib/lxd/unix.socket".into(),
            message: "forkfile.sock".into(),
        };
        assert!(
            !is_helper_race(&unreachable),
            "only LXD's own answer counts"
        );
    }

    /// Replays `answers` (`None`: success, else that error), counting calls and settles.
    async fn replay(answers: &[Option<LxdError>]) -> (Result<u32, String>, u32, u32, u32) {
        let answers = RefCell::new(answers.iter());
        let calls = RefCell::new(0u32);
        let settles = RefCell::new(0u32);
        let (outcome, again) = retry_helper_races(
            || {
                *calls.borrow_mut() += 1;
                let next = answers
                    .borrow_mut()
                    .next()
                    .expect("no call past the script");
                let n = *calls.borrow();
                let out = match next {
                    None => Ok(n),
                    Some(e) if is_helper_race(e) => Err(race()),
                    Some(_) => Err(other()),
                };
                async move { out }
            },
            |e| {
                assert!(is_helper_race(e), "settles only after the race: {e}");
                *settles.borrow_mut() += 1;
                async {}
            },
        )
        .await;
        let calls = *calls.borrow();
        let settles = *settles.borrow();
        (outcome.map_err(|e| e.to_string()), calls, settles, again)
    }

    #[tokio::test]
    async fn a_call_that_meets_the_race_is_tried_again_after_settling() {
        assert_eq!(replay(&[None]).await, (Ok(1), 1, 0, 0));
        assert_eq!(replay(&[Some(race()), None]).await, (Ok(2), 2, 1, 1));
        assert_eq!(
            replay(&[Some(race()), Some(race()), None]).await,
            (Ok(3), 3, 2, 2)
        );
    }

    #[tokio::test]
    async fn the_race_is_tried_a_bounded_number_of_times_and_other_errors_not_again() {
        let (outcome, calls, settles, again) =
            replay(&[Some(race()), Some(race()), Some(race()), None]).await;
        assert!(outcome.unwrap_err().contains("forkfile.sock"));
        assert_eq!((calls, settles, again), (HELPER_RACE_TRIES, 2, 2));
        let (outcome, calls, settles, _) = replay(&[Some(other()), None]).await;
        assert!(outcome.unwrap_err().contains("no space left"));
        assert_eq!((calls, settles), (1, 0));
        let (outcome, calls, _, _) = replay(&[Some(race()), Some(other()), None]).await;
        assert!(outcome.unwrap_err().contains("no space left"));
        assert_eq!(calls, 2);
    }

    #[test]
    fn a_helper_is_alive_only_while_its_pid_file_names_a_live_forkfile() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("forkfile.pid");
        assert!(!helper_alive(&pid_file), "no pid file");
        // A process whose arguments read like LXD's helper (`lxd forkfile -- 3 4 -1 -1`). It
        // says so once it runs (until the exec, the child's arguments are still this test's),
        // then waits on its input with no child of its own to outlive it.
        let mut helper = Command::new("bash")
            .args(["-c", "echo ready; read -r -t 30 _", "forkfile"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let _input = helper.stdin.take();
        let mut ready = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(helper.stdout.take().unwrap()),
            &mut ready,
        )
        .unwrap();
        assert_eq!(ready, "ready\n");
        std::fs::write(&pid_file, format!("{}\n", helper.id())).unwrap();
        assert!(helper_alive(&pid_file));
        helper.kill().unwrap();
        helper.wait().unwrap();
        assert!(!helper_alive(&pid_file), "the helper exited");
        std::fs::write(&pid_file, format!("{}\n", std::process::id())).unwrap();
        assert!(!helper_alive(&pid_file), "a live pid that is not a helper");
        std::fs::write(&pid_file, "not a pid\n").unwrap();
        assert!(!helper_alive(&pid_file));
    }
}
