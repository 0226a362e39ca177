//! `cohort course archive`: archive a course's homes (an operation, followed), list its
//! archives, or download them, streamed to disk and checked against their recorded SHA-256.

use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context};
use cohort_proto::api::course_archives::{ArchiveCourse, CourseArchive};
use cohort_proto::api::operations::Operation;
use futures_util::StreamExt;
use reqwest::Method;
use sha2::{Digest, Sha256};

use super::Session;
use crate::args::course_archive::CourseArchiveArgs;
use crate::client::{seg, Client};
use crate::render::{self, Rows};

pub async fn run(session: &Session, args: CourseArchiveArgs) -> anyhow::Result<()> {
    let (client, code) = session.target(&args.code)?;
    if let Some(dir) = &args.download {
        return download(&client, &code, dir, args.user.as_deref()).await;
    }
    if args.list {
        let archives: Vec<CourseArchive> = client
            .get(&format!("/courses/{}/archive", seg(&code)))
            .await?;
        let mut rows = Rows::new(["USER", "SIZE", "SHA256", "CREATED", "EXPIRES"]);
        for a in &archives {
            rows.push([
                a.user.clone(),
                a.size_bytes.to_string(),
                a.sha256.clone(),
                a.created_at.format("%Y-%m-%d %H:%M UTC").to_string(),
                a.expires_at.format("%Y-%m-%d %H:%M UTC").to_string(),
            ]);
        }
        return render::print(args.format, &rows, &archives);
    }
    let path = format!("/courses/{}/archive", seg(&code));
    let operation: Operation = client
        .post(&path, &ArchiveCourse { days: args.days })
        .await?;
    if !args.wait.resolve(true) {
        println!("{}", operation.id);
        return Ok(());
    }
    crate::progress::wait(&client, &operation, session.quiet).await?;
    Ok(())
}

async fn download(
    client: &Client,
    code: &str,
    dir: &Path,
    user: Option<&str>,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let users: Vec<String> = match user {
        Some(u) => vec![u.to_string()],
        None => client
            .get::<Vec<CourseArchive>>(&format!("/courses/{}/archive", seg(code)))
            .await?
            .into_iter()
            .map(|a| a.user)
            .collect(),
    };
    for user in users {
        let path = format!("/courses/{}/archive/{}", seg(code), seg(&user));
        let response = client.send(client.request(Method::GET, &path)).await?;
        let said = response
            .headers()
            .get("X-Cohort-Sha256")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let target = dir.join(format!("{user}.tar.gz"));
        let mut file = tempfile::NamedTempFile::new_in(dir)?;
        let mut hasher = Sha256::new();
        let mut chunks = response.bytes_stream();
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.context("the download broke off")?;
            hasher.update(&chunk);
            file.write_all(&chunk)?;
        }
        let got = hex::encode(hasher.finalize());
        if let Some(said) = said {
            if said != got {
                bail!("{user}'s archive arrived with SHA-256 {got}, not the recorded {said}");
            }
        }
        file.persist(&target)
            .with_context(|| format!("writing {}", target.display()))?;
        println!("{} {got}", target.display());
    }
    Ok(())
}
