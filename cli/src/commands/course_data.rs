//! `cohort course data ...`. A push is streamed: a directory is written as a tar into the
//! request body as it is read (links that lead outside it are refused before a byte is sent),
//! a tarball is sent as it is; either is hashed on the way, and the controller's SHA-256 must
//! match, so what was stored is what was read here.

use std::io::Write;
use std::path::{Component, Path, PathBuf};

use anyhow::{anyhow, bail, Context};
use cohort_proto::api::course_data::{DataQuota, DataUsage, DatasetPushed, DatasetRemoved};
use cohort_proto::api::operations::{Operation, OperationStatus};
use indicatif::{ProgressBar, ProgressStyle};
use reqwest::Method;
use sha2::{Digest, Sha256};

use super::Session;
use crate::args::course_data::{CourseData, DataCommand, DataPush};
use crate::client::seg;
use crate::units;

/// Bytes per chunk of the body, and chunks in flight: what the push holds in memory.
const CHUNK: usize = 256 * 1024;
const IN_FLIGHT: usize = 8;

pub async fn run(session: &Session, args: CourseData) -> anyhow::Result<()> {
    match args.command {
        DataCommand::Push(push) => push_dataset(session, push).await,
        DataCommand::List(list) => {
            let (client, code) = session.target(&list.code)?;
            let usage: DataUsage = client.get(&format!("/courses/{}/data", seg(&code))).await?;
            println!("NAME\tSIZE\tSHA256\tPUSHED BY\tPUSHED AT");
            for d in &usage.datasets {
                println!(
                    "{}\t{}\t{}\t{}\t{}",
                    d.name,
                    units::byte_size(d.size_bytes),
                    &d.sha256[..12],
                    d.pushed_by.as_deref().unwrap_or("-"),
                    d.pushed_at.format("%Y-%m-%d %H:%M UTC")
                );
            }
            println!(
                "Used {} of {} MiB",
                units::byte_size(usage.used_bytes),
                usage.quota_mib
            );
            Ok(())
        }
        DataCommand::Rm(rm) => {
            let (client, code) = session.target(&rm.code)?;
            let path = format!("/courses/{}/data/{}", seg(&code), seg(&rm.name));
            let removed: DatasetRemoved =
                client.json(client.request(Method::DELETE, &path)).await?;
            if let Some(op) = removed.operation {
                finished(client.wait(&op, |_| {}).await?)?;
            }
            println!("Dataset {} removed from {code}", rm.name);
            Ok(())
        }
        DataCommand::Quota(q) => {
            let (client, code) = session.target(&q.code)?;
            let quota_mib = match q.mib.as_str() {
                "default" => None,
                n => Some(
                    n.parse()
                        .map_err(|_| anyhow!("quota: {n:?} is not a number of MiB"))?,
                ),
            };
            let usage: DataUsage = client
                .put(
                    &format!("/courses/{}/data-quota", seg(&code)),
                    &DataQuota { quota_mib },
                )
                .await?;
            println!("Course {code}'s data quota: {} MiB", usage.quota_mib);
            Ok(())
        }
    }
}

/// An operation that did not succeed is the command's error.
fn finished(op: Operation) -> anyhow::Result<()> {
    if op.status != OperationStatus::Success {
        bail!(
            "operation {} {}: {}",
            op.id,
            op.status,
            op.error.as_deref().unwrap_or("no reason given")
        );
    }
    Ok(())
}

/// Every link under `root` must stay inside it.
fn check_links(root: &Path) -> anyhow::Result<()> {
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?
        {
            let entry = entry?;
            let path = entry.path();
            let kind = entry.file_type()?;
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_symlink() {
                let target = std::fs::read_link(&path)?;
                let rel = path
                    .parent()
                    .unwrap_or(root)
                    .strip_prefix(root)
                    .unwrap_or(Path::new(""));
                if !stays_inside(rel, &target) {
                    bail!(
                        "{}: the link to {} leads outside {}",
                        path.display(),
                        target.display(),
                        root.display()
                    );
                }
            } else if !kind.is_file() {
                bail!(
                    "{}: only files, directories and links can be pushed",
                    path.display()
                );
            }
        }
    }
    Ok(())
}

/// Whether `target`, followed from directory `from` (relative to the root), stays inside.
fn stays_inside(from: &Path, target: &Path) -> bool {
    let mut depth = from.components().count();
    for c in target.components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => {
                if depth == 0 {
                    return false;
                }
                depth -= 1;
            }
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
}

/// The body's bytes, sent in chunks as they are written, and hashed.
struct ChunkSender {
    tx: tokio::sync::mpsc::Sender<std::io::Result<Vec<u8>>>,
    buf: Vec<u8>,
    hash: Sha256,
    size: u64,
    bar: ProgressBar,
}

impl Write for ChunkSender {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        self.hash.update(data);
        self.size += data.len() as u64;
        self.bar.inc(data.len() as u64);
        if self.buf.len() >= CHUNK {
            self.flush()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK));
        self.tx
            .blocking_send(Ok(chunk))
            .map_err(|_| std::io::Error::other("the upload stopped"))
    }
}

async fn push_dataset(session: &Session, args: DataPush) -> anyhow::Result<()> {
    let (client, code) = session.target(&args.code)?;
    let path = PathBuf::from(&args.path);
    let meta = std::fs::metadata(&path).with_context(|| format!("path: {}", path.display()))?;
    let name = match &args.name {
        Some(n) => n.clone(),
        None => {
            let base = path
                .canonicalize()?
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .ok_or_else(|| anyhow!("path: {} has no name; give --name", path.display()))?;
            base.strip_suffix(".tar").map(String::from).unwrap_or(base)
        }
    };
    if meta.is_dir() {
        check_links(&path)?;
    }
    let total = if meta.is_dir() { 0 } else { meta.len() };
    let bar = if session.quiet {
        ProgressBar::hidden()
    } else if total > 0 {
        ProgressBar::new(total).with_style(ProgressStyle::with_template(
            "Pushing {bytes}/{total_bytes} ({bytes_per_sec})",
        )?)
    } else {
        ProgressBar::new_spinner().with_style(ProgressStyle::with_template(
            "Pushing {bytes} ({bytes_per_sec})",
        )?)
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel(IN_FLIGHT);
    let mut sender = ChunkSender {
        tx,
        buf: Vec::with_capacity(CHUNK),
        hash: Sha256::new(),
        size: 0,
        bar: bar.clone(),
    };
    let is_dir = meta.is_dir();
    let producer = tokio::task::spawn_blocking(move || -> anyhow::Result<(String, u64)> {
        if is_dir {
            let mut tar = tar::Builder::new(&mut sender);
            tar.follow_symlinks(false);
            tar.append_dir_all(".", &path)?;
            tar.finish()?;
        } else {
            let mut file = std::fs::File::open(&path)?;
            std::io::copy(&mut file, &mut sender)?;
        }
        sender.flush()?;
        Ok((hex::encode(sender.hash.finalize_reset()), sender.size))
    });
    let body =
        reqwest::Body::wrap_stream(futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx)));
    let request = client
        .request(Method::POST, &format!("/courses/{}/data", seg(&code)))
        .query(&[("name", name.as_str())])
        .header(reqwest::header::CONTENT_TYPE, "application/x-tar")
        .body(body);
    let answer: anyhow::Result<DatasetPushed> = client.json(request).await;
    bar.finish_and_clear();
    let (sent, size) = producer.await??;
    let pushed = answer?;
    if pushed.dataset.sha256 != sent {
        bail!(
            "the controller stored SHA-256 {}, but {} was sent; push again",
            pushed.dataset.sha256,
            sent
        );
    }
    println!(
        "Dataset {name} pushed to {code}: {} (sha256 {})",
        units::byte_size(size),
        &sent[..12]
    );
    if let Some(op) = pushed.operation {
        finished(client.wait(&op, |_| {}).await?)?;
        println!("Mounted at /data/{name} in the course's containers");
    }
    Ok(())
}
