//! `cohort file push|pull`: raw bytes through `/instances/{name}/files?path=P`, owner and mode
//! in the `X-Cohort-Mode/Uid/Gid` headers. Like lxc, a pushed file keeps the local file's owner
//! and mode unless `--uid/--gid/--mode` say otherwise.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context};
use cohort_proto::api::instances::{ExecRequest, ExecResult};
use reqwest::Method;

use super::Session;
use crate::args::file::{File, FileCommand, FilePull, FilePush};
use crate::client::{seg, Client};

pub async fn run(session: &Session, args: File) -> anyhow::Result<()> {
    match args.command {
        FileCommand::Push(push) => self::push(session, push).await,
        FileCommand::Pull(pull) => self::pull(session, pull).await,
    }
}

/// `[<remote>:]<instance>/<path>` into the client, the instance and the absolute path.
fn split_target(session: &Session, raw: &str) -> anyhow::Result<(Client, String, String)> {
    let (client, rest) = session.target(raw)?;
    let (instance, path) = rest
        .split_once('/')
        .ok_or_else(|| anyhow!("Invalid target {raw:?}: expected [<remote>:]<instance>/<path>"))?;
    if instance.is_empty() {
        bail!("Invalid target {raw:?}: no instance name");
    }
    Ok((client, instance.to_string(), format!("/{path}")))
}

fn file_name(path: &str) -> anyhow::Result<&str> {
    Path::new(path)
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| anyhow!("{path:?} names no file"))
}

async fn push(session: &Session, args: FilePush) -> anyhow::Result<()> {
    let (target, sources) = args.paths.split_last().expect("clap requires two paths");
    let (client, instance, dest) = split_target(session, target)?;
    let into_dir = sources.len() > 1 || dest.ends_with('/');
    for source in sources {
        let path = if into_dir {
            format!("{}/{}", dest.trim_end_matches('/'), file_name(source)?)
        } else {
            dest.clone()
        };
        let bytes = std::fs::read(source).with_context(|| format!("reading {source}"))?;
        let meta = std::fs::metadata(source)?;
        let mode = match &args.mode {
            Some(m) => u32::from_str_radix(m, 8).map_err(|_| anyhow!("Invalid --mode {m:?}"))?,
            None => meta.mode() & 0o7777,
        };
        let uid = if args.uid >= 0 {
            args.uid as u32
        } else {
            meta.uid()
        };
        let gid = if args.gid >= 0 {
            args.gid as u32
        } else {
            meta.gid()
        };
        if args.create_dirs {
            make_parent(&client, &instance, &path).await?;
        }
        let url = format!("/instances/{}/files?path={}", seg(&instance), seg(&path));
        let request = client
            .request(Method::PUT, &url)
            .header("X-Cohort-Mode", format!("{mode:04o}"))
            .header("X-Cohort-Uid", uid.to_string())
            .header("X-Cohort-Gid", gid.to_string())
            .body(bytes);
        client.call(request).await?;
    }
    Ok(())
}

/// `mkdir -p` of the file's directory inside the instance, through exec (no files route does it).
async fn make_parent(client: &Client, instance: &str, path: &str) -> anyhow::Result<()> {
    let parent = Path::new(path).parent().unwrap_or(Path::new("/"));
    let request = ExecRequest::new(vec![
        "mkdir".into(),
        "-p".into(),
        parent.display().to_string(),
    ]);
    let result: ExecResult = client
        .post(&format!("/instances/{}/exec", seg(instance)), &request)
        .await?;
    if result.exit_code != 0 {
        bail!("Failed to create {} in {instance}", parent.display());
    }
    Ok(())
}

async fn pull(session: &Session, args: FilePull) -> anyhow::Result<()> {
    let (target, sources) = args.paths.split_last().expect("clap requires two paths");
    let target = PathBuf::from(target);
    let into_dir = sources.len() > 1 || target.is_dir();
    if args.create_dirs && into_dir {
        std::fs::create_dir_all(&target)?;
    }
    for source in sources {
        let (client, instance, path) = split_target(session, source)?;
        let url = format!("/instances/{}/files?path={}", seg(&instance), seg(&path));
        let bytes = client
            .send(client.request(Method::GET, &url))
            .await?
            .bytes()
            .await?;
        if target.as_os_str() == "-" {
            use std::io::Write;
            std::io::stdout().write_all(&bytes)?;
            continue;
        }
        let local = if into_dir {
            target.join(file_name(&path)?)
        } else {
            target.clone()
        };
        if args.create_dirs {
            if let Some(parent) = local.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent)?;
            }
        }
        std::fs::write(&local, &bytes).with_context(|| format!("writing {}", local.display()))?;
    }
    Ok(())
}
