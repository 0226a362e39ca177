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

/// What JupyterLab in container `name` at `address` said.
#[derive(Debug, PartialEq)]
pub enum Heard {
    /// Nothing answers as JupyterLab there (refused, or not its API).
    Absent,
    /// JupyterLab took connections but gave no answer within [`TIMEOUT`] (a loaded node):
    /// its use is unknown, not none.
    Unanswered,
    Said(JupyterActivity),
}

/// Asks JupyterLab in container `name` at `address` about its kernels and terminals.
pub async fn activity(address: Ipv4Addr, name: &str) -> Heard {
    ask(
        &format!("http://{address}:{JUPYTER_PORT}/jupyter/{name}/api"),
        TIMEOUT,
    )
    .await
}

/// Asks the JupyterLab API at `base`, waiting `within` at most.
async fn ask(base: &str, within: Duration) -> Heard {
    let Ok(client) = reqwest::Client::builder()
        .timeout(within)
        .no_proxy()
        .build()
    else {
        return Heard::Absent;
    };
    let get = |what: &'static str| {
        let request = client.get(format!("{base}/{what}"));
        async move {
            let answer = request.send().await?;
            if answer.status().is_server_error() {
                return Ok(Err(Heard::Unanswered));
            }
            let Ok(answer) = answer.error_for_status() else {
                return Ok(Err(Heard::Absent));
            };
            Ok::<_, reqwest::Error>(Ok(answer.bytes().await?))
        }
    };
    let (kernels, terminals) = tokio::join!(get("kernels"), get("terminals"));
    let kernels = match kernels {
        Ok(Ok(body)) => body,
        Ok(Err(heard)) => return heard,
        Err(e) if e.is_timeout() => return Heard::Unanswered,
        Err(_) => return Heard::Absent,
    };
    let Ok(kernels) = serde_json::from_slice::<Vec<Kernel>>(&kernels) else {
        return Heard::Absent;
    };
    let terminals: Vec<Terminal> = match terminals {
        Ok(Ok(t)) => serde_json::from_slice(&t).unwrap_or_default(),
        // The kernels said; a terminal's use unknown is a terminal's use missed.
        Err(e) if e.is_timeout() => return Heard::Unanswered,
        _ => Vec::new(),
    };
    Heard::Said(summarise(&kernels, &terminals, Utc::now()))
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
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A server on 127.0.0.1 that answers each connection with `answer`, or holds it unanswered
    /// when `answer` is `None`; its API base.
    async fn server(answer: Option<&'static str>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((mut conn, _)) = listener.accept().await {
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf).await;
                match answer {
                    Some(body) => {
                        let head = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                            body.len()
                        );
                        let _ = conn.write_all(head.as_bytes()).await;
                        let _ = conn.write_all(body.as_bytes()).await;
                    }
                    None => held.push(conn),
                }
            }
        });
        format!("http://127.0.0.1:{port}/jupyter/c1/api")
    }

    #[tokio::test]
    async fn a_jupyter_that_takes_the_connection_and_says_nothing_is_unanswered_not_absent() {
        let wait = Duration::from_millis(300);
        assert_eq!(ask(&server(None).await, wait).await, Heard::Unanswered);
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let refused = format!("http://127.0.0.1:{closed}/jupyter/c1/api");
        assert_eq!(ask(&refused, wait).await, Heard::Absent);
        let said = ask(&server(Some(r#"[{"execution_state":"busy"}]"#)).await, wait).await;
        assert_eq!(
            said,
            Heard::Said(JupyterActivity {
                kernels_executing: 1,
                ..JupyterActivity::default()
            })
        );
    }

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
