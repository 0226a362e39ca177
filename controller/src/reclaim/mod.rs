//! The reclaimer: a periodic pass that stops containers whose GPU has been idle longer than their
//! course's `idle_gpu_minutes` (or, where the course's `idle_action` is `detach`, takes their GPUs
//! and leaves them running), that ran longer than `max_runtime_minutes`, or whose course has
//! ended, and deletes a course's containers once `delete_after_end_s` has passed since its end.
//! Each stop or delete is an ordinary operation (the worker does it) with the reason kept on the
//! instance and in the audit log. A pass runs in one transaction under a PostgreSQL advisory
//! lock, so with two controllers only one acts at a time, and a decision is re-checked against
//! `desired_state`, so nothing is stopped or deleted twice. Before a pass, the nodes are asked
//! what the containers it would reclaim for idleness are doing ([`activity`]). Idle stops, idle
//! GPU detaches, longest-run stops, lease ends and budget detaches are warned first and wait for
//! their warning ([`warning`]).

use std::sync::Arc;
use std::time::Duration;

use cohort_proto::api::instances::DesiredState;
use diesel::prelude::*;
use serde_json::json;

use crate::app::state::Controller;
use crate::db::enums::{AuditAction, AuditObject, IdleAction};
use crate::db::models::audit;
use crate::db::models::course_reclaim::CourseReclaim;
use crate::db::models::instance::Instance;
use crate::db::models::instance_activity::InstanceActivity;
use crate::db::models::instance_usage::InstanceUsage;
use crate::db::queries::reclaim;
use crate::error::ActionResult;
use crate::jobs::payload::{ChangeState, Delete, Job, Reclaimed};
use crate::jobs::{enqueue, Audit, Step, StepKind};

pub mod activity;
pub mod budget;
pub mod leases;
pub mod reattach;
pub mod warning;

use crate::db::models::reclaim_warning::{ReclaimWarning, IDLE, MAX_RUNTIME};
use warning::Gate;

/// Who the audit log names for the reclaimer's actions.
const ACTOR: &str = "reclaim";

/// The reclaimer's name among the supervised loops (`/healthz`).
pub const LOOP: &str = "reclaimer";

pub async fn run(ctl: Arc<Controller>) {
    let every = Duration::from_secs(ctl.config.reclaim.interval_s.max(1));
    let mut unanswered = activity::Unanswered::default();
    loop {
        ctl.loops.tick(LOOP);
        tokio::time::sleep(every).await;
        match pass_remembering(&ctl, &mut unanswered).await {
            Ok(n) if n > 0 => tracing::info!(actions = n, "reclaim pass"),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "reclaim pass failed"),
        }
    }
}

/// One pass; returns how many stops and deletes it started (0 when another controller holds
/// the lock).
pub async fn pass(ctl: &Controller) -> ActionResult<usize> {
    pass_remembering(ctl, &mut activity::Unanswered::default()).await
}

/// One pass, with what earlier passes did not hear (see [`activity::Unanswered`]).
pub async fn pass_remembering(
    ctl: &Controller,
    unanswered: &mut activity::Unanswered,
) -> ActionResult<usize> {
    // What the containers about to be reclaimed are doing, asked of their nodes first.
    // A container whose node was asked and did not answer is not known idle: spared, for one
    // idle window at most.
    let not_heard = activity::refresh(ctl).await.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "asking nodes for containers' activity");
        Default::default()
    });
    if !not_heard.is_empty() {
        tracing::info!(instances = ?not_heard, "no answer about their activity: spared this pass");
    }
    let cfg = ctl.config.reclaim.clone();
    // On the controller's clock: these times never leave this loop.
    unanswered.update(chrono::Utc::now(), &not_heard);
    let spared = unanswered.spared(chrono::Utc::now());
    let done = ctl.db(move |conn| {
        conn.transaction(|conn| {
            let locked = reclaim::try_lock(conn)?;
            if !locked {
                return Ok((0, Vec::new()));
            }
            // The database's clock: usage times are written with it.
            let now = crate::db::queries::coordination::clock(conn)?;
            let minute = chrono::Duration::seconds(cfg.minute_s.max(1) as i64);
            let grace = chrono::Duration::seconds(cfg.delete_after_end_s as i64);
            let mut acted = 0;
            // Warnings told in this pass, written to terminals once it commits.
            let mut warned = Vec::new();
            ReclaimWarning::clear_stale(conn)?;

            // Courses whose end has passed: mark them ended, stop, and after the grace delete.
            let ended = reclaim::ended_courses(conn, now)?;
            for (course_id, code, ends_at) in ended {
                let marked = reclaim::mark_ended(conn, course_id)?;
                if marked > 0 {
                    audit::record(conn, ACTOR, AuditAction::End, AuditObject::Course, &code, json!({"ends_at": ends_at}))?;
                }
                for i in reclaim::live_of_course(conn, course_id)? {
                    if ends_at + grace <= now {
                        let reason = format!(
                            "course {code} ended at {ends_at}; deleted after the {}s grace period",
                            cfg.delete_after_end_s
                        );
                        delete(conn, &i, &code, &reason)?;
                        acted += 1;
                    } else if i.desired_state == DesiredState::Running {
                        stop(conn, &i, &code, &format!("course {code} ended at {ends_at}"))?;
                        acted += 1;
                    }
                }
            }

            // Idle GPUs and the longest run, per course policy.
            for policy in CourseReclaim::all(conn)? {
                let code = reclaim::course_code(conn, policy.course_id)?;
                let running = reclaim::running_of_course(conn, policy.course_id)?;
                for (i, since, gpu_active, detached, notebook_active) in running {
                    // JupyterLab's kernels and terminals are use, as GPU use is; where the
                    // course stops idle containers, so are terminal input and busy processes.
                    let mut active = gpu_active.max(notebook_active);
                    if policy.idle_action == IdleAction::Stop {
                        active = active.max(InstanceActivity::in_use_at(conn, i.id)?);
                    }
                    let Some(since) = since else { continue };
                    // Each reclaim is warned `warn_minutes` ahead (half its window at most)
                    // and waits for its warning.
                    let ahead = |window: i32| minute * warning::ahead(policy.warn_minutes, window);
                    if let Some(max) = policy.max_runtime_minutes {
                        let at = since + minute * max;
                        let warn = ahead(max);
                        let gate = warning::gate(
                            conn, &i, MAX_RUNTIME, "stop", at, warn, now, &code, &mut warned,
                        )?;
                        if gate == Gate::Act {
                            let reason = format!(
                                "ran {} minutes, the course's max_runtime is {max} minutes",
                                (now - since).num_seconds() / minute.num_seconds()
                            );
                            stop(conn, &i, &code, &reason)?;
                            acted += 1;
                            continue;
                        }
                    } else {
                        // A limit lifted takes its warning with it.
                        ReclaimWarning::clear(conn, i.id, MAX_RUNTIME)?;
                    }
                    if let Some(idle) = policy.idle_gpu_minutes {
                        if spared.spares(i.id, minute * idle) {
                            continue;
                        }
                        let last_use = active.map_or(since, |a| a.max(since));
                        let at = last_use + minute * idle;
                        let warn = ahead(idle);
                        let reason = format!(
                            "no GPU or notebook use since {last_use} (the course's idle_gpu_minutes is {idle})"
                        );
                        if policy.idle_action == IdleAction::Detach {
                            // Once per instance, and only when it holds GPUs to give back.
                            let holds = reclaim::holds_gpus(conn, i.id)?;
                            if detached.is_none() && holds {
                                let gate = warning::gate(
                                    conn, &i, IDLE, "detach", at, warn, now, &code, &mut warned,
                                )?;
                                if gate == Gate::Act {
                                    detach(conn, &i, &code, &reason)?;
                                    acted += 1;
                                }
                            } else {
                                ReclaimWarning::clear(conn, i.id, IDLE)?;
                            }
                        } else {
                            let gate = warning::gate(
                                conn, &i, IDLE, "stop", at, warn, now, &code, &mut warned,
                            )?;
                            if gate == Gate::Act {
                                stop(conn, &i, &code, &reason)?;
                                acted += 1;
                            }
                        }
                    } else {
                        ReclaimWarning::clear(conn, i.id, IDLE)?;
                    }
                }
            }

            // GPU budgets: told at 80 %, warned before, detached at 100 %.
            let (detached, mut notices) = budget::pass(conn, now, minute, ACTOR)?;
            notices.append(&mut warned);
            // GPU leases (on-demand courses): warned, ended when due, granted in fair-share
            // order.
            let leases =
                leases::queue::pass(conn, cfg.lease_hour_s.max(1), minute, now, &mut notices)?;
            Ok((acted + detached + leases, notices))
        })
    })
    .await?;
    let (acted, notices) = done;
    budget::tell(ctl, notices).await;
    Ok(acted)
}

fn stop(conn: &mut PgConnection, i: &Instance, course: &str, reason: &str) -> QueryResult<()> {
    Instance::set_desired(conn, i.id, DesiredState::Stopped)?;
    InstanceUsage::set_stopped(conn, i.id, reason)?;
    tracing::info!(instance = %i.name, %reason, "reclaim: stopping");
    // The GPU slots go back once it is stopped: reclaiming is for whoever waits.
    let job = Job::ChangeInstanceState(ChangeState {
        force: true,
        reason: Some(reason.to_string()),
        release_gpus: true,
        ..Default::default()
    });
    act(conn, i, course, reason, &job, StepKind::Stop)
}

/// `idle_action = detach`: the container keeps running; the worker has its node remove the
/// `cohort-gpu*` devices, then releases the GPU slots (see `jobs::gpus::detach`).
pub(crate) fn detach(
    conn: &mut PgConnection,
    i: &Instance,
    course: &str,
    reason: &str,
) -> QueryResult<()> {
    InstanceUsage::set_detached(conn, i.id, reason)?;
    tracing::info!(instance = %i.name, %reason, "reclaim: detaching GPUs");
    let job = Job::DetachGpus(Reclaimed {
        reason: reason.to_string(),
    });
    act(conn, i, course, reason, &job, StepKind::DetachGpus)
}

fn delete(conn: &mut PgConnection, i: &Instance, course: &str, reason: &str) -> QueryResult<()> {
    Instance::set_desired(conn, i.id, DesiredState::Deleted)?;
    InstanceUsage::set_stopped(conn, i.id, reason)?;
    tracing::info!(instance = %i.name, %reason, "reclaim: deleting");
    let job = Job::DeleteInstance(Delete {
        reason: Some(reason.to_string()),
        ..Default::default()
    });
    act(conn, i, course, reason, &job, StepKind::Delete)
}

/// Records the reclaimer's operation of one step on `i`, audited under the step's name.
fn act(
    conn: &mut PgConnection,
    i: &Instance,
    course: &str,
    reason: &str,
    job: &Job,
    action: StepKind,
) -> QueryResult<()> {
    let step = Step::new(action, &i.name, Some(i.id));
    let audit = Audit {
        actor: ACTOR,
        action: action.into(),
        object_kind: AuditObject::Instance,
        object: &i.name,
        detail: json!({"reason": reason, "course": course}),
    };
    enqueue(conn, job, None, &i.name, &[step], Some(audit)).map(drop)
}
