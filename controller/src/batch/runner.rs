//! The jobs' loop and what it asks of the nodes. Each pass ([`pass`]) makes its decisions in
//! the database ([`super::queue`]), then asks the agents, all at once, to start, stop, warn or
//! read back the jobs concerned, and records what they answered.
//!
//! In the container a job is three files under the student's `~/.cohort/jobs/`: `ID.pid` (the
//! job's process, the leader of a session of its own, and the shell waiting for it, each with
//! its start time so a reused pid is not taken for it), `ID.log` (its stdout and stderr) and
//! `ID.exit` (its exit code, written when it ends). Every exec runs as root only to find the
//! student (`getent`), then as the student (`runuser`): a student's files are never read or
//! written with more rights than theirs. Nothing here is tied to a connection or to the agent's
//! process, so a restart of either loses no job: the next pass reads the files again.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use cohort_proto::agent::ExecRequest;
use cohort_proto::api::batch_jobs::JobState;
use diesel::prelude::*;

use super::queue::{self, Ask, Task};
use crate::agent_client::{AgentError, NodeAgent};
use crate::app::state::{connect_node, Controller};
use crate::db::models::batch_job::BatchJob;
use crate::db::models::node::Node;
use crate::error::ActionResult;

/// The jobs' loop's name among the supervised loops (`/healthz`).
pub const LOOP: &str = "jobs";

/// Finds the student and runs the rest of the script (`$1` on) as them, in their home.
/// Arguments: user, script, then the script's arguments.
const AS_STUDENT: &str = r#"u="$1"; s="$2"; shift 2
h=$(getent passwd "$u" | cut -d: -f6)
[ -n "$h" ] || { echo "no user $u in the container" >&2; exit 90; }
cd "$h" || exit 90
exec runuser -u "$u" -- env HOME="$h" USER="$u" LOGNAME="$u" sh -c "$s" "$0" "$@""#;

/// Starts job `$1` in `$HOME/$2` (the home when empty) with the command `$3...` (`env` and its
/// assignments first). Idempotent: a job whose pid file exists has started.
const START: &str = r#"set -u
id="$1"; wd="$2"; shift 2
d="$HOME/.cohort/jobs"
mkdir -p "$d" || exit 91
[ -e "$d/$id.pid" ] && exit 0
[ -z "$wd" ] || cd "$wd" 2>/dev/null || { echo "workdir $HOME/$wd is not a directory in the container" >&2; exit 92; }
setsid -f sh -c '
  d="$1"; id="$2"; shift 2
  st() { sed "s/^.*) //" "/proc/$1/stat" 2>/dev/null | cut -d" " -f20; }
  setsid "$@" >> "$d/$id.log" 2>&1 < /dev/null &
  c=$!
  echo "$c $(st $c) $$ $(st $$)" > "$d/$id.pid.new" && mv "$d/$id.pid.new" "$d/$id.pid"
  wait $c; e=$?
  echo $e > "$d/$id.exit.new" && mv "$d/$id.exit.new" "$d/$id.exit"
' cohort-job "$d" "$id" "$@" > /dev/null 2>&1 < /dev/null
i=0
while [ ! -e "$d/$id.pid" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
[ -e "$d/$id.pid" ] || { echo "the job did not start within 10 s" >&2; exit 93; }"#;

/// Reads job `$1` back: `exit N`, `running`, `lost` (its processes are gone without an exit
/// code: the container restarted) or `absent` (never started here).
const STATUS: &str = r#"d="$HOME/.cohort/jobs"; id="$1"
st() { sed "s/^.*) //" "/proc/$1/stat" 2>/dev/null | cut -d" " -f20; }
alive() { [ -n "$1" ] && [ -n "$2" ] && [ "$(st "$1")" = "$2" ]; }
if [ -f "$d/$id.exit" ]; then echo "exit $(head -c 12 "$d/$id.exit")"; exit 0; fi
[ -f "$d/$id.pid" ] || { echo absent; exit 0; }
read -r c cs w ws < "$d/$id.pid"
if alive "$c" "$cs" || alive "$w" "$ws"; then echo running; exit 0; fi
if [ -f "$d/$id.exit" ]; then echo "exit $(head -c 12 "$d/$id.exit")"; else echo lost; fi"#;

/// Stops job `$1`: TERM to its session's process group, KILL to what is left after 10 s.
const STOP: &str = r#"d="$HOME/.cohort/jobs"; id="$1"
st() { sed "s/^.*) //" "/proc/$1/stat" 2>/dev/null | cut -d" " -f20; }
[ -f "$d/$id.pid" ] || exit 0
read -r c cs w ws < "$d/$id.pid"
[ -n "$c" ] && [ "$(st "$c")" = "$cs" ] || exit 0
kill -TERM "-$c" 2>/dev/null
i=0
while [ "$(st "$c")" = "$cs" ] && [ $i -lt 50 ]; do sleep 0.2; i=$((i+1)); done
kill -KILL "-$c" 2>/dev/null
exit 0"#;

/// Appends a line (`$2`) to job `$1`'s log.
const TELL: &str = r#"printf '%s\n' "$2" >> "$HOME/.cohort/jobs/$1.log""#;

/// Prints job `$1`'s log from byte `$2`, at most `$3` bytes.
const READ_LOG: &str = r#"f="$HOME/.cohort/jobs/$1.log"
[ -f "$f" ] || exit 0
tail -c "+$(($2 + 1))" "$f" | head -c "$3""#;

/// An exec of `script` as `user`; `action` names it in the container's process list
/// (`cohort-job-start`, ...).
fn as_student(
    action: &str,
    user: &str,
    script: &str,
    args: Vec<String>,
    timeout_s: u32,
) -> ExecRequest {
    let mut command = vec![
        "/bin/sh".into(),
        "-c".into(),
        AS_STUDENT.into(),
        format!("cohort-job-{action}"),
        user.to_string(),
        script.to_string(),
    ];
    command.extend(args);
    ExecRequest {
        timeout_s: Some(timeout_s),
        ..ExecRequest::new(command)
    }
}

fn decode(b64: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap_or_default()
}

/// Up to [`super::LOG_CHUNK`] bytes of job `id`'s log from `offset`.
pub async fn read_log(
    agent: &dyn NodeAgent,
    instance: &str,
    user: &str,
    id: i64,
    offset: u64,
) -> Result<Vec<u8>, AgentError> {
    let req = as_student(
        "log",
        user,
        READ_LOG,
        vec![
            id.to_string(),
            offset.to_string(),
            super::LOG_CHUNK.to_string(),
        ],
        30,
    );
    let out = agent.exec(instance.to_string(), req).await?;
    Ok(decode(&out.stdout_base64))
}

/// What a node said of one job.
#[derive(Debug, Clone, PartialEq)]
enum Heard {
    Started,
    /// The start failed in the container: why.
    NotStarted(String),
    Exited(i32),
    Running,
    Lost,
    /// Asked to stop, or warned: nothing to record.
    Done,
    /// The node did not answer: why.
    Silent(String),
}

/// Asks the node about one job; a stop is followed by reading the job back.
async fn ask(agent: Arc<dyn NodeAgent>, task: &Task) -> Heard {
    let heard = ask_once(agent.clone(), task).await;
    if task.what != Ask::Stop || heard != Heard::Done {
        return heard;
    }
    let poll = Task {
        what: Ask::Poll,
        ..task.clone()
    };
    ask_once(agent, &poll).await
}

async fn ask_once(agent: Arc<dyn NodeAgent>, task: &Task) -> Heard {
    let id = task.job.id.to_string();
    let req = match &task.what {
        Ask::Start(_) => {
            let mut args = vec![id, task.job.workdir.clone().unwrap_or_default()];
            args.push("env".into());
            args.push("--".into());
            if let Some(env) = task.job.environment.as_object() {
                for (k, v) in env {
                    args.push(format!("{k}={}", v.as_str().unwrap_or_default()));
                }
            }
            args.extend(task.job.command.iter().cloned());
            as_student("start", &task.username, START, args, 60)
        }
        Ask::Poll => as_student("status", &task.username, STATUS, vec![id], 30),
        Ask::Stop => as_student("stop", &task.username, STOP, vec![id], 60),
        Ask::Warn(at) => {
            let line = format!(
                "cohort: job {id} reaches its time limit at {} and is stopped then",
                at.format("%Y-%m-%d %H:%M:%S UTC")
            );
            as_student("tell", &task.username, TELL, vec![id, line], 30)
        }
    };
    let out = match agent.exec(task.instance.clone(), req).await {
        Ok(out) => out,
        Err(e) => return Heard::Silent(e.to_string()),
    };
    let stdout = String::from_utf8_lossy(&decode(&out.stdout_base64))
        .trim()
        .to_string();
    match &task.what {
        Ask::Start(_) if out.exit_code == 0 => Heard::Started,
        Ask::Start(_) => {
            let stderr = String::from_utf8_lossy(&decode(&out.stderr_base64))
                .trim()
                .to_string();
            Heard::NotStarted(if stderr.is_empty() {
                format!("its start failed in the container (exit {})", out.exit_code)
            } else {
                stderr
            })
        }
        Ask::Poll => match stdout.split_once(' ') {
            Some(("exit", code)) => Heard::Exited(code.trim().parse().unwrap_or(-1)),
            _ if stdout == "running" => Heard::Running,
            _ if stdout == "lost" || stdout == "absent" => Heard::Lost,
            _ => Heard::Silent(format!(
                "unexpected answer {stdout:?} (exit {})",
                out.exit_code
            )),
        },
        Ask::Stop | Ask::Warn(_) => Heard::Done,
    }
}

/// Records what one node said of one job.
fn record(conn: &mut PgConnection, task: &Task, heard: &Heard, hour_s: u64) -> QueryResult<()> {
    let job = &task.job;
    match heard {
        Heard::Started => {
            let until = match task.what {
                Ask::Start(until) => until,
                _ => None,
            };
            BatchJob::running(conn, job.id, until, hour_s)?;
        }
        Heard::NotStarted(why) => queue::end(conn, job, JobState::Failed, None, why)?,
        Heard::Exited(code) => {
            // Read again: a cancel may have come since the pass.
            let now = BatchJob::find(conn, job.id)?.unwrap_or_else(|| job.clone());
            let (state, reason) = match (now.stop_state.as_deref(), now.stop_reason) {
                (Some("cancelled"), Some(r)) => (JobState::Cancelled, r),
                (Some(_), Some(r)) => (JobState::Killed, r),
                _ if *code == 0 => (JobState::Succeeded, "exited with code 0".to_string()),
                _ => (JobState::Failed, format!("exited with code {code}")),
            };
            queue::end(conn, job, state, Some(*code), &reason)?;
        }
        Heard::Running => {
            BatchJob::reconciled(conn, job.id)?;
        }
        Heard::Lost => {
            let reason = format!(
                "its processes are gone without an exit code: container {} was restarted, \
                 reset or stopped while it ran",
                task.instance
            );
            queue::end(conn, job, JobState::Killed, None, &reason)?;
        }
        Heard::Done => {}
        Heard::Silent(why) => {
            if job.state != JobState::Starting {
                BatchJob::unknown(conn, job.id, &format!("its node does not answer: {why}"))?;
            }
        }
    }
    Ok(())
}

/// What one pass did.
#[derive(Debug, Clone, Copy, Default)]
pub struct Passed {
    /// Jobs the nodes were asked about.
    pub asked: usize,
    /// A job waits for its GPU's attach: look again shortly.
    pub attaching: bool,
}

/// One pass: decisions, then the nodes asked, then what they said recorded.
pub async fn pass(ctl: &Controller) -> ActionResult<Passed> {
    let hour_s = ctl.config.reclaim.lease_hour_s.max(1);
    let agents = ctl.agents.clone();
    let (tasks, links, attaching) = ctl
        .db(move |conn| {
            conn.transaction(|conn| {
                let decided = queue::pass(conn, hour_s)?;
                let (tasks, attaching) = (decided.tasks, decided.attaching);
                let mut links = std::collections::HashMap::new();
                for t in &tasks {
                    if let std::collections::hash_map::Entry::Vacant(slot) = links.entry(t.node_id)
                    {
                        let node = Node::find(conn, t.node_id)?;
                        slot.insert(
                            connect_node(agents.as_ref(), conn, &node).map_err(|e| e.to_string()),
                        );
                    }
                }
                Ok((tasks, links, attaching))
            })
        })
        .await?;
    let n = tasks.len();
    let asked = tasks.into_iter().map(|task| {
        let link = links.get(&task.node_id).cloned();
        async move {
            let heard = match link {
                Some(Ok(agent)) => {
                    let answer = tokio::time::timeout(Duration::from_secs(90), ask(agent, &task));
                    answer
                        .await
                        .unwrap_or_else(|_| Heard::Silent("no answer within 90 s".into()))
                }
                Some(Err(e)) => Heard::Silent(e.to_string()),
                None => Heard::Silent("no node".into()),
            };
            (task, heard)
        }
    });
    let heard = futures_util::future::join_all(asked).await;
    if heard.is_empty() {
        return Ok(Passed {
            asked: 0,
            attaching,
        });
    }
    // A job ended gives its GPU back (through the worker, which wakes the loop when it is
    // done); one that started may let the next of its student's jobs ask for its turn.
    let changed = heard
        .iter()
        .any(|(_, h)| !matches!(h, Heard::Running | Heard::Done | Heard::Silent(_)));
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            for (task, heard) in &heard {
                record(conn, task, heard, hour_s)?;
            }
            Ok(())
        })
    })
    .await?;
    if changed {
        wake(ctl);
    }
    Ok(Passed {
        asked: n,
        attaching,
    })
}

/// The loop: a pass every `COHORT_JOB_INTERVAL_S` (default 5), at once after a submit, a
/// cancel or the worker's attach or detach of a GPU, and every 250 ms while an attach is due.
pub async fn run(ctl: Arc<Controller>) {
    let every = Duration::from_secs(ctl.config.reclaim.job_interval_s.max(1));
    let mut next = every;
    loop {
        ctl.loops.tick(LOOP);
        tokio::select! {
            _ = tokio::time::sleep(next) => {}
            _ = ctl.jobs_changed.notified() => {}
        }
        next = match pass(&ctl).await {
            // The worker's wake may come before its operation is marked finished.
            Ok(p) if p.attaching => every.min(Duration::from_millis(250)),
            Ok(_) => every,
            Err(e) => {
                tracing::warn!(error = %e, "jobs pass failed");
                every
            }
        };
    }
}

/// Makes the loop pass now.
pub fn wake(ctl: &Controller) {
    ctl.jobs_changed.notify_one();
}
