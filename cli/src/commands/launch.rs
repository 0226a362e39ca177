//! `cohort launch` and `cohort init`: one `POST /instances`, then wait for the create operation.

use std::collections::BTreeMap;

use anyhow::{anyhow, bail};
use cohort_proto::api::instances::{CreateInstance, GpuShare, Limits, PlacementStrategy};
use cohort_proto::api::operations::Operation;

use super::Session;
use crate::args::init::Init;
use crate::args::launch::Launch;
use crate::{progress, units};

/// The controller's defaults for limits not given (DESIGN: 1 core, 1024 MiB, 10 GiB).
const DEFAULT_LIMITS: Limits = Limits {
    cpu: 1,
    memory_mib: 1024,
    disk_gib: 10,
};

pub async fn launch(session: &Session, args: Launch) -> anyhow::Result<()> {
    let wait = args.wait.resolve(true);
    create(session, args.create, true, wait).await
}

pub async fn init(session: &Session, args: Init) -> anyhow::Result<()> {
    create(session, args, false, true).await
}

async fn create(session: &Session, args: Init, start: bool, wait: bool) -> anyhow::Result<()> {
    let Some(raw_name) = args.name.as_deref() else {
        bail!(
            "An instance name is required: cohort {} IMAGE NAME",
            verb(start)
        );
    };
    let (client, name) = session.target(raw_name)?;
    let (image_remote, image) = session.config.parse_remote(&args.image)?;
    let (name_remote, _) = session.config.parse_remote(raw_name)?;
    if args.image.contains(':') && image_remote != name_remote {
        bail!("The image must come from the instance's own remote ({name_remote})");
    }
    let request = create_request(args, name.clone(), image, start)?;
    if !session.quiet {
        println!("Creating {name}");
    }
    let operation: Operation = client.post("/instances", &request).await?;
    if !wait {
        println!("{}", operation.id);
        return Ok(());
    }
    if start && !session.quiet {
        println!("Starting {name}");
    }
    progress::wait(&client, &operation, session.quiet).await?;
    Ok(())
}

/// The `POST /instances` body for `init`/`launch` flags.
pub fn create_request(
    args: Init,
    name: String,
    image: String,
    start: bool,
) -> anyhow::Result<CreateInstance> {
    Ok(CreateInstance {
        name,
        image,
        limits: Some(limits(&args.config, &args.device)?),
        gpus: args.gpus,
        gpu_model: args.gpu_model,
        gpu_share: GpuShare::default(),
        config: extra_config(&args.config)?,
        owner: args.owner,
        node: args.target,
        strategy: PlacementStrategy::default(),
        priority: 0,
        queue: true,
        start,
    })
}

fn verb(start: bool) -> &'static str {
    if start {
        "launch"
    } else {
        "init"
    }
}

fn key_value(pair: &str) -> anyhow::Result<(&str, &str)> {
    pair.split_once('=')
        .ok_or_else(|| anyhow!("Bad key=value pair: {pair:?}"))
}

/// `limits.cpu` and `limits.memory` from `-c`, the root disk size from `-d root,size=`.
fn limits(config: &[String], devices: &[String]) -> anyhow::Result<Limits> {
    let mut limits = DEFAULT_LIMITS;
    for pair in config {
        match key_value(pair)? {
            ("limits.cpu", v) => {
                limits.cpu = v
                    .parse()
                    .map_err(|_| anyhow!("limits.cpu must be a number of cores, not {v:?}"))?;
            }
            ("limits.memory", v) => limits.memory_mib = units::mib(v)?,
            _ => {}
        }
    }
    for device in devices {
        let (name, setting) = device.split_once(',').ok_or_else(|| {
            anyhow!("Bad device override syntax, expecting <device>,<key>=<value>: {device}")
        })?;
        match (name, key_value(setting)?) {
            ("root", ("size", v)) => limits.disk_gib = units::gib(v)?,
            _ => bail!("Only the root disk size can be set (-d root,size=SIZE), not {device:?}"),
        }
    }
    Ok(limits)
}

/// The `-c` keys other than limits, passed through for the controller to allow or refuse.
fn extra_config(config: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    let mut extra = BTreeMap::new();
    for pair in config {
        let (key, value) = key_value(pair)?;
        if !matches!(key, "limits.cpu" | "limits.memory") {
            extra.insert(key.to_string(), value.to_string());
        }
    }
    Ok(extra)
}
