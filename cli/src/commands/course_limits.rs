//! `cohort course limits CODE --cpu N --memory SIZE --disk SIZE`: each student's cores, memory
//! and root disk (`PUT /courses/{code}/limits`); the flags given change, the others keep their
//! value. Prints what the change reaches, and the containers already made that keep other
//! limits.

use anyhow::bail;
use cohort_proto::api::courses::{CourseLimits, CourseLimitsChange};

use super::Session;
use crate::args::course::CourseLimitsArgs;
use crate::client::seg;
use crate::units;

pub async fn set(session: &Session, args: CourseLimitsArgs) -> anyhow::Result<()> {
    let limits = CourseLimits {
        cpu: args.cpu,
        memory_mib: args.memory.as_deref().map(units::mib).transpose()?,
        disk_gib: args.disk.as_deref().map(units::gib).transpose()?,
    };
    if limits == CourseLimits::default() {
        bail!("nothing to set: give --cpu, --memory and/or --disk");
    }
    let (client, code) = session.target(&args.code)?;
    let path = format!("/courses/{}/limits", seg(&code));
    let change: CourseLimitsChange = client.put(&path, &limits).await?;
    println!("{}", change.note);
    for k in &change.kept {
        println!(
            "  {} ({}): {} cores, {} MiB, {} GiB",
            k.instance, k.owner, k.cpu, k.memory_mib, k.disk_gib
        );
    }
    Ok(())
}
