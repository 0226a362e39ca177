//! JupyterLab's own account of a container's work: `api/kernels` (each kernel's
//! `execution_state` and `last_activity`, which the server moves only on the kernel's own
//! messages) and `api/terminals` (`last_activity`, moved by a terminal's input and output).
//! A tab left open polls these same endpoints and the contents API every few seconds; none of
//! that moves a kernel's or a terminal's activity, so it keeps nothing alive, while a cell
//! running for an hour does.
//!
//! The agent asks on the container's address and JupyterLab's fixed port ([`JUPYTER_PORT`]),
//! as the portal's relay reaches it.

use std::net::Ipv4Addr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use cohort_proto::activity::JupyterActivity;
use serde::Deserialize;

/// The port JupyterLab listens on in a Jupyter image (`images/jupyter`).
pub const JUPYTER_PORT: u16 = 8888;

/// Longest wait for JupyterLab's answer: a container without it refuses at once, and one whose
/// kernel keeps Python busy on a loaded node answers within seconds (the controller waits 10).
const TIMEOUT: Duration = Duration::from_secs(7);

#[derive(Debug, Deserialize)]
struct Kernel {
    #[serde(default)]
    execution_state: Option<String>,
    #[serde(default)]
    last_activity: Option<DateTime<Utc>>,
}

#[derive(Debug, Deserialize)]
struct Terminal {
    #[serde(default)]
    last_activity: Option<DateTime<Utc>>,
}

/// What JupyterLab in container `name` at `address` says; `None` when nothing answers as
/// JupyterLab there.
pub async fn activity(address: Ipv4Addr, name: &str) -> Option<JupyterActivity> {
    let client = reqwest::Client::builder()
        .timeout(TIMEOUT)
        .no_proxy()
        .build()
        .ok()?;
    let base = format!("http://{address}:{JUPYTER_PORT}/jupyter/{name}/api");
    let get = |what: &'static str| {
        let request = client.get(format!("{base}/{what}"));
        async move {
            let answer = request.send().await.ok()?.error_for_status().ok()?;
            answer.bytes().await.ok()
        }
    };
    let (kernels, terminals) = tokio::join!(get("kernels"), get("terminals"));
    let kernels: Vec<Kernel> = serde_json::from_slice(&kernels?).ok()?;
    let terminals: Vec<Terminal> = terminals
        .and_then(|t| serde_json::from_slice(&t).ok())
        .unwrap_or_default();
    Some(summarise(&kernels, &terminals, Utc::now()))
}

fn summarise(kernels: &[Kernel], terminals: &[Terminal], now: DateTime<Utc>) -> JupyterActivity {
    let age = |t: DateTime<Utc>| (now - t).num_seconds().max(0) as u64;
    JupyterActivity {
        kernels_executing: kernels
            .iter()
            .filter(|k| k.execution_state.as_deref() == Some("busy"))
            .count() as u32,
        kernel_activity_age_s: kernels
            .iter()
            .filter_map(|k| k.last_activity)
            .max()
            .map(age),
        terminal_activity_age_s: terminals
            .iter()
            .filter_map(|t| t.last_activity)
            .max()
            .map(age),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_jupyter_server_answers() {
        let kernels: Vec<Kernel> = serde_json::from_str(
            r#"[{"id":"a","name":"python3","last_activity":"2026-11-27T12:00:00.123456Z",
                 "execution_state":"busy","connections":1},
                {"id":"b","name":"python3","last_activity":"2026-11-27T11:00:00Z",
                 "execution_state":"idle","connections":0}]"#,
        )
        .unwrap();
        let terminals: Vec<Terminal> =
            serde_json::from_str(r#"[{"name":"1","last_activity":"2026-11-27T11:59:00Z"}]"#)
                .unwrap();
        let now: DateTime<Utc> = "2026-11-27T12:01:00Z".parse().unwrap();
        let seen = summarise(&kernels, &terminals, now);
        assert_eq!(seen.kernels_executing, 1);
        assert_eq!(seen.kernel_activity_age_s, Some(59));
        assert_eq!(seen.terminal_activity_age_s, Some(120));
        assert_eq!(summarise(&[], &[], now), JupyterActivity::default());
    }
}
