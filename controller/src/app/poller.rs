//! The node poller: asks every agent for its inventory over mutual TLS on an interval, records
//! capacity, GPUs, images and instance states, marks silent nodes `offline` (their instances
//! `unknown`) after the threshold, and reconciles a node when it answers again. Nothing is marked
//! offline during the start-up grace period, so restarting a controller takes no node down.
//!
//! Drift: a container Cohort keeps running that is found stopped, one Cohort keeps stopped that
//! is found running (started by hand, or by LXD at boot), or one found missing from its node's
//! LXD, was changed behind Cohort's back. The instance shows it (`stopped`, `running` or
//! `missing`, with a `drift:` reason in `error`) and the audit log records it once, as the
//! `poller`; with the `repair` policy an operation also starts it again, stops it again or
//! re-creates it (its port, GPU slots and home volume are still its own). A container in the
//! node's project with no row here is an orphan: recorded at once (its port leaves placement)
//! and reported as drift `orphan` once seen on two polls; an admin adopts or deletes it.
//!
//! A listing judges only rows older than itself: the node's rows are read before its listing is
//! asked for, and a row that changed between that read and the record (a create that finished,
//! a stop that landed) is left for the next poll. Judged the other way round, a create finishing
//! between the listing and the read looks `missing`, and a repair would make it a second time.
//!
//! Lock order (see `crate::db`): the node's heartbeat, GPUs and images are recorded in one
//! transaction, its instances in another, so a poll never holds its node's row while it waits
//! for an instance's (a delete holds the instance and its usage trigger waits for the node).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use cohort_proto::agent::{Instance as AgentInstance, Inventory};
use cohort_proto::api::instances::{DesiredState, ObservedState};
use diesel::prelude::*;
use tokio::task::JoinHandle;

use crate::app::config::DriftPolicy;
use crate::app::gpu_time;
use crate::app::metrics::Metrics;
use crate::app::renewal;
use crate::app::state::{connect_pinned, Controller};
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::audit;
use crate::db::models::gpu::{Gpu, ReportedGpu};
use crate::db::models::image::Image;
use crate::db::models::instance::Instance;
use crate::db::models::instance_usage::{InstanceUsage, Observed};
use crate::db::models::node::{Node, NodeFacts};
use crate::db::models::node_certificate::NodeCertificate;
use crate::db::models::operation_item::OperationItem;
use crate::db::models::orphan::Orphan;
use crate::db::queries::gpu_usage;
use crate::error::{ActionError, ActionResult};
use crate::jobs::payload::{ChangeState, Create, Job};
use crate::jobs::{enqueue, Step, StepKind};
use crate::placement::gpu_slots;

/// Longest a single poll may take.
const POLL_TIMEOUT: Duration = Duration::from_secs(10);

/// Polls every node once an interval: a round starts an interval after the previous one
/// started and does not wait for its polls, so each node is asked every interval however long
/// any poll takes. A node that does not answer (partitioned, its daemon hung) runs into its
/// poll's timeout alone, is skipped by the rounds until then, and delays no other node's poll
/// nor the offline check.
pub async fn run(ctl: Arc<Controller>) {
    let every = Duration::from_secs(ctl.config.poller.interval_s.max(1));
    let in_flight = InFlight::default();
    crate::app::fixed_rate::on_beat(every, || async {
        start_polls(&ctl, &in_flight).await;
        if let Err(e) = mark_offline(&ctl).await {
            tracing::warn!(error = %e, "offline check failed");
        }
    })
    .await;
}

/// The names of the nodes whose poll has not ended yet.
#[derive(Clone, Default)]
struct InFlight(Arc<std::sync::Mutex<HashSet<String>>>);

/// Takes a node out of [`InFlight`] when its poll ends, however it ends.
struct PollDone {
    in_flight: InFlight,
    name: String,
}

impl Drop for PollDone {
    fn drop(&mut self) {
        if let Ok(mut names) = self.in_flight.0.lock() {
            names.remove(&self.name);
        }
    }
}

/// Polls every node once, side by side, and waits for every poll to end.
pub async fn poll_all(ctl: &Arc<Controller>) {
    for poll in start_polls(ctl, &InFlight::default()).await {
        let _ = poll.await;
    }
}

/// Starts a poll of every node not already being polled; the polls' handles.
async fn start_polls(ctl: &Arc<Controller>, in_flight: &InFlight) -> Vec<JoinHandle<()>> {
    let nodes = match ctl.db(|conn| Ok(Node::list(conn)?)).await {
        Ok(nodes) => nodes,
        Err(e) => {
            tracing::warn!(error = %e, "listing nodes failed");
            return Vec::new();
        }
    };
    let mut polls = Vec::with_capacity(nodes.len());
    for node in nodes {
        let started = in_flight
            .0
            .lock()
            .map(|mut names| names.insert(node.name.clone()))
            .unwrap_or(false);
        if !started {
            tracing::debug!(node = %node.name, "the last poll has not ended; skipped this round");
            continue;
        }
        let done = PollDone {
            in_flight: in_flight.clone(),
            name: node.name.clone(),
        };
        let ctl = ctl.clone();
        polls.push(tokio::spawn(async move {
            let _done = done;
            let name = node.name.clone();
            let outcome = poll(&ctl, node).await;
            Metrics::count(
                &ctl.metrics.polls,
                if outcome.is_ok() { "ok" } else { "error" },
            );
            if let Err(e) = outcome {
                tracing::debug!(node = %name, error = %e, "poll failed");
            }
        }));
    }
    polls
}

async fn poll(ctl: &Controller, node: Node) -> ActionResult<()> {
    let agents = ctl.agents.clone();
    let n = node.clone();
    let (agent, live) = ctl
        .db(move |conn| {
            let live = NodeCertificate::live(conn, &n.name)?;
            Ok((connect_pinned(agents.as_ref(), &n, &live)?, live))
        })
        .await?;
    // The rows the listing will judge, as they were before it was asked for.
    let node_id = node.id;
    let before: HashMap<i64, chrono::DateTime<Utc>> = ctl
        .db(move |conn| Ok(Instance::on_node(conn, node_id)?))
        .await?
        .into_iter()
        .map(|i| (i.id, i.updated_at))
        .collect();
    let fetched = tokio::time::timeout(POLL_TIMEOUT, async {
        Ok::<_, crate::agent_client::AgentError>((
            agent.inventory().await?,
            agent.list_instances().await?,
        ))
    })
    .await;
    let (inventory, instances) = match fetched {
        Ok(Ok(both)) => both,
        Ok(Err(source)) => return Err(ActionError::on_node(node.name)(source)),
        Err(_) => {
            return Err(ActionError::Internal(format!(
                "node {}: poll timed out",
                node.name
            )))
        }
    };
    let policy = ctl.config.poller.drift;
    let name = node.name.clone();
    let pause = ctl.config.poller.pause_after_listing_ms;
    if pause > 0 {
        // A test's hook (`COHORT_POLL_PAUSE_AFTER_LISTING_MS`): widens the window in which the
        // listing grows stale, so a test can make a create finish inside it.
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
    let (inventory, instances) = (Arc::new(inventory), Arc::new(instances));
    let (n, inv, listing) = (node.clone(), inventory.clone(), instances.clone());
    // GPU time since the node's previous poll, recorded with this poll's heartbeat (issue 43).
    let cap_s = 3.0 * ctl.config.poller.interval_s.max(1) as f64;
    let added = ctl
        .db(move |conn| {
            conn.transaction(|conn| {
                let previous = gpu_usage::last_heartbeat_locked(conn, n.id)?;
                record_node(conn, &n, &inv)?;
                let now = Utc::now();
                Ok(gpu_time::account(
                    conn, &n, previous, now, cap_s, &inv, &listing,
                )?)
            })
        })
        .await?;
    ctl.metrics.count_gpu_time(&added);
    let idle_below = ctl.config.poller.gpu_idle_below_percent;
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            record(
                conn, &node, &inventory, &instances, &before, policy, idle_below,
            )
        })
    })
    .await?;
    // A renewal that fails is tried again next poll; the node's current certificate still works.
    match tokio::time::timeout(
        POLL_TIMEOUT,
        renewal::check(ctl, &name, live, agent.as_ref()),
    )
    .await
    {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::warn!(node = %name, error = %e, "certificate renewal failed"),
        Err(_) => tracing::warn!(node = %name, "certificate renewal timed out"),
    }
    Ok(())
}

/// Records what one inventory says of the node itself: heartbeat, capacity, GPUs and images.
fn record_node(conn: &mut PgConnection, node: &Node, inv: &Inventory) -> ActionResult<()> {
    Node::record_poll(
        conn,
        node.id,
        &NodeFacts {
            cores: inv.host.cores as i32,
            memory_bytes: inv.host.memory_bytes as i64,
            disk_total_bytes: inv.host.disk_total_bytes as i64,
            disk_free_bytes: inv.host.disk_free_bytes as i64,
            pool_used_bytes: inv.lxd.pool_used_bytes.min(i64::MAX as u64) as i64,
            pool_total_bytes: inv.lxd.pool_total_bytes.min(i64::MAX as u64) as i64,
            daemon: Some(&inv.lxd.daemon),
            lxd_version: Some(&inv.lxd.version),
            storage_driver: Some(&inv.lxd.storage_driver),
            nvidia_runtime: inv.nvidia_runtime,
            last_heartbeat_at: Utc::now(),
        },
    )?;
    let mut uuids = Vec::new();
    for gpu in &inv.gpus.gpus {
        let mut report =
            |uuid: &str, idx: u32, model: &str, memory: u64, mig_parent: Option<&str>| {
                uuids.push(uuid.to_string());
                Gpu::upsert(
                    conn,
                    &ReportedGpu {
                        node_id: node.id,
                        uuid,
                        idx: idx as i32,
                        model,
                        memory_bytes: memory as i64,
                        pci_address: &gpu.pci_address,
                        mig_parent,
                        present: true,
                    },
                )
                .map(|_| ())
            };
        if gpu.mig_enabled && !gpu.mig_devices.is_empty() {
            // With MIG on, only the MIG instances are allocatable.
            for mig in &gpu.mig_devices {
                report(
                    &mig.uuid,
                    mig.index,
                    &mig.name,
                    mig.memory_total_bytes,
                    Some(&gpu.uuid),
                )?;
            }
        } else {
            report(
                &gpu.uuid,
                gpu.index,
                &gpu.name,
                gpu.memory_total_bytes,
                None,
            )?;
        }
    }
    Gpu::mark_missing(conn, node.id, &uuids)?;
    let fingerprints: Vec<String> = inv.images.iter().map(|i| i.fingerprint.clone()).collect();
    Image::set_held(conn, node.id, &fingerprints)?;
    Ok(())
}

/// Reconciles the node's instances with what its LXD held when listed; `before` holds each
/// row's `updated_at` as read before the listing was asked for.
fn record(
    conn: &mut PgConnection,
    node: &Node,
    inv: &Inventory,
    seen: &[AgentInstance],
    before: &HashMap<i64, chrono::DateTime<Utc>>,
    policy: DriftPolicy,
    idle_below_percent: u32,
) -> ActionResult<()> {
    let lxd: HashMap<&str, &AgentInstance> = seen.iter().map(|i| (i.name.as_str(), i)).collect();
    let mut known = Instance::on_node(conn, node.id)?;
    record_orphans(conn, node, seen, &known)?;
    // Rows are locked (updated) in id order, the lock order's.
    known.sort_by_key(|i| i.id);
    for instance in known {
        if instance.observed_state == ObservedState::Pending {
            continue;
        }
        if before.get(&instance.id) != Some(&instance.updated_at) {
            // Changed (or placed here) since the listing was asked for: the listing may be
            // older than the row, so it is judged by the next poll.
            continue;
        }
        let found = lxd
            .get(instance.name.as_str())
            .map(|f| crate::agent_client::observed(&f.status));
        if let Some(state) = found {
            let mut used = gpu_use(inv, &instance.name, state);
            let listed = lxd.get(instance.name.as_str()).copied();
            used.gpu_busy =
                gpu_time::Held::of(inv, listed, &instance.name).busy(idle_below_percent);
            InstanceUsage::observe(conn, instance.id, &used)?;
        }
        let Some(drift) = drift_of(&instance, found) else {
            // Keep a drift reason while the drift lasts (a stopped one stays stopped).
            let now = found.unwrap_or(ObservedState::Missing);
            // And a start's wait for a GPU while it stays stopped.
            let keep = instance.error.as_deref().filter(|e| {
                (e.starts_with("drift:") && now == instance.observed_state)
                    || (e.starts_with(gpu_slots::WAITING) && now == ObservedState::Stopped)
            });
            Instance::set_observed(conn, instance.id, now, keep)?;
            continue;
        };
        if busy(conn, instance.id)? {
            // An operation of Cohort's own is changing it: not drift.
            continue;
        }
        let state = found.unwrap_or(ObservedState::Missing);
        Instance::set_observed(conn, instance.id, state, Some(drift.reason()))?;
        audit::record(
            conn,
            "poller",
            AuditAction::Drift,
            AuditObject::Instance,
            &instance.name,
            serde_json::json!({"node": node.name, "was": instance.observed_state, "found": state,
                               "repair": policy == DriftPolicy::Repair}),
        )?;
        tracing::warn!(instance = %instance.name, node = %node.name, found = %state, "drift");
        if policy == DriftPolicy::Repair {
            let repair = Some("drift".to_string());
            let (job, action) = match drift {
                Drift::Stopped | Drift::Started => (
                    Job::ChangeInstanceState(ChangeState {
                        repair,
                        ..Default::default()
                    }),
                    if drift == Drift::Stopped {
                        StepKind::Start
                    } else {
                        StepKind::Stop
                    },
                ),
                Drift::Missing => (Job::CreateInstance(Create { repair }), StepKind::Create),
            };
            enqueue(
                conn,
                &job,
                None,
                &instance.name,
                &[Step::new(action, &instance.name, Some(instance.id))],
                None,
            )?;
        }
    }
    Ok(())
}

/// Containers in the node's project without a row here: recorded (their ports leave placement
/// at once) and reported as drift `orphan` once seen on two polls running.
fn record_orphans(
    conn: &mut PgConnection,
    node: &Node,
    seen: &[AgentInstance],
    known: &[Instance],
) -> ActionResult<()> {
    let ours: HashSet<&str> = known.iter().map(|i| i.name.as_str()).collect();
    // Only what Cohort made (its idempotency key or SSH device): a template container an admin
    // keeps in the project for copies is no orphan.
    let strays: Vec<(String, ObservedState, Option<i32>)> = seen
        .iter()
        .filter(|i| i.idempotency_key.is_some() || i.ssh_port.is_some())
        .filter(|i| !ours.contains(i.name.as_str()))
        .map(|i| {
            let status = crate::agent_client::observed(&i.status);
            (i.name.clone(), status, i.ssh_port.map(i32::from))
        })
        .collect();
    for orphan in Orphan::record_seen(conn, node.id, &strays)? {
        audit::record(
            conn,
            "poller",
            AuditAction::Drift,
            AuditObject::Instance,
            &orphan.name,
            serde_json::json!({"node": node.name, "found": "orphan", "status": orphan.status,
                               "ssh_port": orphan.ssh_port}),
        )?;
        tracing::warn!(instance = %orphan.name, node = %node.name, "drift: a container Cohort has no record of");
    }
    Ok(())
}

/// What the node's GPUs report of `name`'s compute processes, per GPU and in all.
fn gpu_use(inv: &Inventory, name: &str, state: ObservedState) -> Observed {
    let mut per_gpu = serde_json::Map::new();
    let (mut processes, mut bytes) = (0i32, 0i64);
    for gpu in &inv.gpus.gpus {
        let mine: Vec<_> = gpu
            .processes
            .iter()
            .filter(|p| p.instance.as_deref() == Some(name))
            .collect();
        if mine.is_empty() {
            continue;
        }
        let used: u64 = mine.iter().filter_map(|p| p.used_memory_bytes).sum();
        let share = if gpu.memory_total_bytes > 0 {
            used as f64 / gpu.memory_total_bytes as f64
        } else {
            0.0
        };
        per_gpu.insert(
            gpu.uuid.clone(),
            serde_json::json!({"processes": mine.len(), "memory_used_bytes": used, "memory_share": share}),
        );
        processes += mine.len() as i32;
        bytes += i64::try_from(used).unwrap_or(i64::MAX);
    }
    Observed {
        running: state == ObservedState::Running,
        gpus: serde_json::Value::Object(per_gpu),
        gpu_processes: processes,
        gpu_memory_used_bytes: bytes,
        gpu_busy: processes > 0,
    }
}

/// What changed behind Cohort's back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Drift {
    Stopped,
    /// Running while Cohort wants it stopped: a stop undone, and with it a GPU slot or a
    /// reclaim's purpose.
    Started,
    Missing,
}

impl Drift {
    fn reason(self) -> &'static str {
        match self {
            Drift::Stopped => "drift: the container was stopped outside Cohort",
            Drift::Started => "drift: the container was started outside Cohort",
            Drift::Missing => "drift: the container is missing on its node",
        }
    }
}

/// Drift newly seen in this poll: reported once, on the change, not on every poll after.
fn drift_of(instance: &Instance, found: Option<ObservedState>) -> Option<Drift> {
    use ObservedState as Seen;
    let (wanted, was) = (instance.desired_state, instance.observed_state);
    match found {
        None if wanted != DesiredState::Deleted && !matches!(was, Seen::Missing | Seen::Queued) => {
            Some(Drift::Missing)
        }
        Some(Seen::Stopped)
            if wanted == DesiredState::Running && matches!(was, Seen::Running | Seen::Unknown) =>
        {
            Some(Drift::Stopped)
        }
        Some(Seen::Running)
            if wanted == DesiredState::Stopped && matches!(was, Seen::Stopped | Seen::Unknown) =>
        {
            Some(Drift::Started)
        }
        _ => None,
    }
}

/// Whether an unfinished operation has an item for the instance.
fn busy(conn: &mut PgConnection, instance_id: i64) -> QueryResult<bool> {
    OperationItem::unfinished_for(conn, instance_id)
}

/// After the grace period, nodes silent past the threshold go `offline` and their instances
/// show `unknown`.
async fn mark_offline(ctl: &Controller) -> ActionResult<()> {
    if ctl.started.elapsed() < Duration::from_secs(ctl.config.poller.startup_grace_s) {
        return Ok(());
    }
    let cutoff = Utc::now() - chrono::Duration::seconds(ctl.config.poller.offline_after_s as i64);
    // Instances before nodes (the lock order, see `crate::db`): a node that answers between
    // the two statements keeps its state, and its next poll corrects its instances.
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let silent = Node::silent(conn, cutoff)?;
            if silent.is_empty() {
                return Ok(());
            }
            for &id in &silent {
                Instance::mark_unknown_on(conn, id)?;
            }
            for id in Node::mark_silent_offline(conn, cutoff)? {
                tracing::warn!(node = id, "node went offline");
            }
            Ok(())
        })
    })
    .await
}
