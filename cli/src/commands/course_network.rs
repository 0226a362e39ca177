//! `--egress` and `--ssh-from` of `cohort course create|set`, and `cohort course set`: the flags
//! given change the course's policy, the others keep what it has; `--home-size` sets the size of
//! its students' homes, `--home-snapshots` and `--home-snapshots-keep` their snapshot schedule,
//! `--archive-days` how long their archived homes are kept.

use anyhow::bail;
use cohort_proto::api::courses::{
    Course as CourseInfo, CourseArchiveDays, CourseHome, CourseHomeSnapshots,
    CourseHomeSnapshotsChange, CourseJupyter, Egress, NetworkPolicy,
};

use super::Session;
use crate::args::course::{CourseSet, NetworkFlags};
use crate::client::seg;
use crate::units;

/// `open`, `none`, or a comma-separated list of `CIDR[:PORT]` (checked by the controller).
pub fn egress(flag: &str) -> anyhow::Result<Egress> {
    Ok(match flag.trim() {
        "open" => Egress::Open,
        "none" => Egress::None,
        "" => bail!("--egress takes open, none or CIDR[:PORT],..."),
        list => Egress::Allow(list.split(',').map(|e| e.trim().to_string()).collect()),
    })
}

/// `anywhere` (or empty) for no restriction, else a comma-separated list of CIDRs.
pub fn ssh_from(flag: &str) -> Vec<String> {
    match flag.trim() {
        "" | "anywhere" => Vec::new(),
        list => list.split(',').map(|c| c.trim().to_string()).collect(),
    }
}

/// `current` changed by the flags given; `None` when no flag was given.
pub fn policy(
    current: &NetworkPolicy,
    flags: &NetworkFlags,
) -> anyhow::Result<Option<NetworkPolicy>> {
    if flags.egress.is_none() && flags.ssh_from.is_none() {
        return Ok(None);
    }
    Ok(Some(NetworkPolicy {
        egress: match &flags.egress {
            Some(e) => egress(e)?,
            None => current.egress.clone(),
        },
        ssh_from: match &flags.ssh_from {
            Some(s) => ssh_from(s),
            None => current.ssh_from.clone(),
        },
    }))
}

/// `cohort course set CODE --home-size ... --jupyter-instructors ... --egress ... --ssh-from ...`.
pub async fn set(session: &Session, args: CourseSet) -> anyhow::Result<()> {
    let home = match args.home_size.as_deref().map(str::trim) {
        None => None,
        Some("default") => Some(CourseHome { home_mib: None }),
        Some(size) => Some(CourseHome {
            home_mib: Some(units::mib(size)?),
        }),
    };
    let network = args.network.egress.is_some() || args.network.ssh_from.is_some();
    let budget = super::course_budget::set_request(&args.budget)?;
    let snapshots = args.home_snapshots.is_some() || args.home_snapshots_keep.is_some();
    let gpu_mode = super::gpu::mode_request(&args.gpu_mode)?;
    if gpu_mode.is_none()
        && home.is_none()
        && args.jupyter_instructors.is_none()
        && !network
        && budget.is_none()
        && !snapshots
        && args.warn_minutes.is_none()
        && args.archive_days.is_none()
    {
        bail!(
            "nothing to set: give --home-size, --home-snapshots, --home-snapshots-keep, \
             --archive-days, --jupyter-instructors, --egress, --ssh-from, \
             --gpu-hours-per-student, --budget-period, --gpu-mode, --gpu-lease-max-hours \
             and/or --warn-minutes"
        );
    }
    let (client, code) = session.target(&args.code)?;
    let path = format!("/courses/{}", seg(&code));
    if let Some(budget) = budget {
        super::course_budget::set(&client, &path, budget).await?;
    }
    if let Some(flags) = gpu_mode {
        super::gpu::set_mode(&client, &path, flags).await?;
    }
    if let Some(home) = home {
        let _: CourseInfo = client.put(&format!("{path}/home"), &home).await?;
    }
    if snapshots {
        let body = CourseHomeSnapshots {
            home_snapshots: args.home_snapshots.clone(),
            home_snapshots_keep: args.home_snapshots_keep,
        };
        let change: CourseHomeSnapshotsChange =
            client.put(&format!("{path}/home/snapshots"), &body).await?;
        if let Some(op) = change.operation {
            println!(
                "Homes already made take the schedule through operation {} ({} item(s)).",
                op.id,
                op.items.len()
            );
        }
    }
    if let Some(archive_days) = args.archive_days {
        let body = CourseArchiveDays { archive_days };
        let _: CourseInfo = client.put(&format!("{path}/archive-days"), &body).await?;
    }
    if let Some(warn_minutes) = args.warn_minutes {
        let body = cohort_proto::api::courses::CourseReclaimWarning { warn_minutes };
        let _: CourseInfo = client
            .put(&format!("{path}/reclaim-warning"), &body)
            .await?;
    }
    if let Some(instructors) = args.jupyter_instructors {
        let body = CourseJupyter { instructors };
        let _: CourseInfo = client.put(&format!("{path}/jupyter"), &body).await?;
    }
    if network {
        let course: CourseInfo = client.get(&path).await?;
        if let Some(policy) = policy(&course.network, &args.network)? {
            let _: CourseInfo = client.put(&format!("{path}/network"), &policy).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_change_only_what_they_name() {
        let current = NetworkPolicy {
            egress: Egress::None,
            ssh_from: vec!["192.0.2.0/24".into()],
        };
        let flags = |egress: Option<&str>, ssh: Option<&str>| NetworkFlags {
            egress: egress.map(String::from),
            ssh_from: ssh.map(String::from),
        };
        assert_eq!(policy(&current, &flags(None, None)).unwrap(), None);
        let open = policy(&current, &flags(Some("open"), None))
            .unwrap()
            .unwrap();
        assert_eq!(open.egress, Egress::Open);
        assert_eq!(open.ssh_from, current.ssh_from);
        let anywhere = policy(&current, &flags(None, Some("anywhere")))
            .unwrap()
            .unwrap();
        assert_eq!(anywhere.egress, Egress::None);
        assert!(anywhere.ssh_from.is_empty());
        let mirror = policy(&current, &flags(Some("10.1.2.3/32:443, 10.9.0.0/16"), None))
            .unwrap()
            .unwrap();
        assert_eq!(
            mirror.egress,
            Egress::Allow(vec!["10.1.2.3/32:443".into(), "10.9.0.0/16".into()])
        );
        assert!(egress(" ").is_err());
    }
}
