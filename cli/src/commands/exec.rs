//! `cohort exec NAME -- CMD`: the command runs to completion in the container (the agent's exec
//! is non-interactive), then its stdout and stderr are written out and its exit code returned.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Read, Write};

use anyhow::{anyhow, Context};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use cohort_proto::api::instances::{ExecRequest, ExecResult};

use super::Session;
use crate::args::exec::Exec;
use crate::client::seg;

pub async fn run(session: &Session, args: Exec) -> anyhow::Result<i32> {
    let (client, name) = session.target(&args.instance)?;
    let mut environment = BTreeMap::new();
    for pair in &args.env {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| anyhow!("Bad environment variable {pair:?}: expected KEY=VALUE"))?;
        environment.insert(key.to_string(), value.to_string());
    }
    let request = ExecRequest {
        command: args.command,
        environment,
        user: args.user,
        group: args.group,
        cwd: args.cwd,
        stdin_base64: stdin(args.disable_stdin)?,
        timeout_s: None,
    };
    let result: ExecResult = client
        .post(&format!("/instances/{}/exec", seg(&name)), &request)
        .await?;
    let stdout = STANDARD
        .decode(&result.stdout_base64)
        .context("decoding the command's stdout")?;
    let stderr = STANDARD
        .decode(&result.stderr_base64)
        .context("decoding the command's stderr")?;
    std::io::stdout().write_all(&stdout)?;
    std::io::stdout().flush()?;
    std::io::stderr().write_all(&stderr)?;
    Ok(result.exit_code)
}

/// Piped input goes to the command, as with lxc; a terminal is never read, since the command
/// cannot interact with it.
fn stdin(disabled: bool) -> anyhow::Result<Option<String>> {
    let input = std::io::stdin();
    if disabled || input.is_terminal() {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    input.lock().read_to_end(&mut bytes)?;
    Ok((!bytes.is_empty()).then(|| STANDARD.encode(bytes)))
}
