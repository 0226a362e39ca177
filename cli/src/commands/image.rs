//! `cohort image`: the controller's image catalog, listed like lxc's, imported from a unified
//! tarball streamed as the request body, and distributed to the nodes ahead of a class.

use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use cohort_proto::api::images::{Image, ImageDistribution};
use indicatif::ProgressBar;
use reqwest::Method;

use super::Session;
use crate::args::image::{
    AliasCommand, Image as ImageArgs, ImageCommand, ImageDistribute, ImageImport,
};
use crate::client::{seg, Client};
use crate::render::{self, Rows};
use crate::{progress, units};

pub async fn run(session: &Session, args: ImageArgs) -> anyhow::Result<()> {
    match args.command {
        ImageCommand::List(list) => {
            let (remote, filters) = super::list::split_remote(&list.filters);
            let images = fetch(&session.remote_only(remote)?, &filters).await?;
            let mut rows = Rows::new([
                "ALIAS",
                "FINGERPRINT",
                "GPU READY",
                "JUPYTER",
                "DESCRIPTION",
                "TYPE",
                "SIZE",
                "UPLOAD DATE",
                "NODES",
            ]);
            for image in &images {
                rows.push([
                    image.alias.clone(),
                    short(&image.fingerprint),
                    render::yes_no(image.gpu_ready).to_lowercase(),
                    render::yes_no(image.jupyter).to_lowercase(),
                    image.description.clone(),
                    "CONTAINER".into(),
                    units::byte_size(image.size_bytes),
                    upload_date(&image.created_at),
                    image.nodes.join(", "),
                ]);
            }
            render::print(list.format, &rows, &images)
        }
        ImageCommand::Import(import) => self::import(session, import).await,
        ImageCommand::Distribute(args) => distribute(session, args).await,
        ImageCommand::Delete(delete) => {
            for raw in &delete.images {
                let (client, name) = session.target(raw)?;
                let image = resolve(&client, &name).await?;
                let path = format!("/images/{}", seg(&image.fingerprint));
                client.call(client.request(Method::DELETE, &path)).await?;
            }
            Ok(())
        }
        ImageCommand::Alias(alias) => match alias.command {
            AliasCommand::List(list) => {
                let (remote, filters) = super::list::split_remote(&list.filters);
                let images = fetch(&session.remote_only(remote)?, &filters).await?;
                let mut rows = Rows::new(["ALIAS", "FINGERPRINT", "TYPE", "DESCRIPTION"]);
                for image in &images {
                    rows.push([
                        image.alias.clone(),
                        short(&image.fingerprint),
                        "CONTAINER".into(),
                        image.description.clone(),
                    ]);
                }
                let aliases: Vec<_> = images
                    .iter()
                    .map(|i| {
                        serde_json::json!({"name": i.alias, "target": i.fingerprint,
                        "type": "container", "description": i.description})
                    })
                    .collect();
                render::print(list.format, &rows, &aliases)
            }
            AliasCommand::Rename(rename) => {
                let (client, old) = session.target(&rename.old)?;
                let path = format!("/images/{}", seg(&old));
                let body = serde_json::json!({"alias": rename.new});
                let _: Image = client
                    .json(client.request(Method::PATCH, &path).json(&body))
                    .await?;
                Ok(())
            }
        },
    }
}

/// Starts the distribution, says which nodes are left out, and waits (by default) with a bar
/// counting nodes; an error naming every node that failed.
async fn distribute(session: &Session, args: ImageDistribute) -> anyhow::Result<()> {
    let (client, name) = session.target(&args.image)?;
    let path = format!("/images/{}/distribute", seg(&name));
    let answer: ImageDistribution = client.post(&path, &serde_json::json!({})).await?;
    if !session.quiet {
        for node in &answer.already_held {
            eprintln!("{node}: already holds {name}");
        }
        for skipped in &answer.skipped {
            eprintln!("{}: skipped ({})", skipped.node, skipped.state);
        }
    }
    if !args.wait.resolve(true) {
        println!("{}", answer.operation.id);
        return Ok(());
    }
    let done = progress::wait(&client, &answer.operation, session.quiet).await?;
    if !session.quiet {
        for item in &done.items {
            eprintln!("{}: imported {name}", item.target);
        }
    }
    Ok(())
}

/// The images whose alias or fingerprint starts with every filter, sorted by alias.
async fn fetch(client: &Client, filters: &[&str]) -> anyhow::Result<Vec<Image>> {
    let mut images: Vec<Image> = client.get("/images").await?;
    images.retain(|i| {
        filters
            .iter()
            .all(|f| i.alias.starts_with(f) || i.fingerprint.starts_with(f))
    });
    images.sort_by(|a, b| a.alias.cmp(&b.alias));
    Ok(images)
}

/// An image by alias, or by a fingerprint prefix that only one image has.
async fn resolve(client: &Client, name: &str) -> anyhow::Result<Image> {
    let images: Vec<Image> = client.get("/images").await?;
    if let Some(image) = images.iter().find(|i| i.alias == name) {
        return Ok(image.clone());
    }
    let mut matching = images
        .into_iter()
        .filter(|i| i.fingerprint.starts_with(name));
    match (matching.next(), matching.next()) {
        (Some(image), None) => Ok(image),
        (Some(_), Some(_)) => bail!("Image fingerprint prefix {name:?} is ambiguous"),
        (None, _) => bail!("Image not found"),
    }
}

fn short(fingerprint: &str) -> String {
    fingerprint.chars().take(12).collect()
}

/// lxc's upload date: `Nov 22, 2026 at 1:17pm (UTC)`.
pub fn upload_date(date: &chrono::DateTime<chrono::Utc>) -> String {
    date.format("%b %-d, %Y at %-I:%M%P (UTC)").to_string()
}

async fn import(session: &Session, args: ImageImport) -> anyhow::Result<()> {
    let tarball = &args.args[0];
    let client = session.remote_only(args.args.get(1).map(String::as_str))?;
    let file = tokio::fs::File::open(tarball)
        .await
        .with_context(|| format!("opening {tarball}"))?;
    let size = file.metadata().await?.len();
    let mut query = vec![("alias", args.alias.clone())];
    if let Some(description) = &args.description {
        query.push(("description", description.clone()));
    }
    if args.gpu_ready {
        query.push(("gpu_ready", "true".into()));
    }
    if args.jupyter {
        query.push(("jupyter", "true".into()));
    }
    let request = client
        .request(Method::POST, "/images")
        .query(&query)
        .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
        .header(reqwest::header::CONTENT_LENGTH, size)
        .body(reqwest::Body::from(file));
    let spinner = if session.quiet {
        ProgressBar::hidden()
    } else {
        let bar = ProgressBar::new_spinner();
        bar.set_message(format!("Uploading image: {}", units::byte_size(size)));
        bar.enable_steady_tick(Duration::from_millis(200));
        bar
    };
    let image: anyhow::Result<Image> = client.json(request).await;
    spinner.finish_and_clear();
    let image = image.map_err(|e| anyhow!("{e:#}"))?;
    println!("Image imported with fingerprint: {}", image.fingerprint);
    Ok(())
}
