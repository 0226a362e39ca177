//! The archive sweep: every `COHORT_ARCHIVE_SWEEP_S` it deletes the archived homes whose time is
//! up (by the database's clock): its row goes, audited as `archive_expired`, in one
//! transaction, then its file. A row replaced by a newer archive meanwhile is left alone, and
//! so is its file (the row is deleted only while it is the one read); a file already gone is
//! no error.

use std::sync::Arc;
use std::time::Duration;

use diesel::prelude::*;
use serde_json::json;

use super::archive::{archive_path, remove_file};
use crate::app::state::Controller;
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::audit;
use crate::db::models::course_archive::CourseArchive;
use crate::error::ActionResult;

/// The sweep's name among the supervised loops (`/healthz`).
pub const LOOP: &str = "archive_sweep";

pub async fn run(ctl: Arc<Controller>) {
    let every = Duration::from_secs(ctl.config.server.archive_sweep_s.max(1));
    crate::app::fixed_rate::on_beat(every, || async {
        ctl.loops.tick(LOOP);
        if let Err(e) = sweep_once(&ctl).await {
            tracing::warn!(error = %e, "sweeping expired archives failed");
        }
    })
    .await;
}

/// One pass; the number of archives deleted.
pub async fn sweep_once(ctl: &Controller) -> ActionResult<usize> {
    let expired = ctl.db(|conn| Ok(CourseArchive::expired(conn)?)).await?;
    let mut deleted = 0;
    for found in expired {
        let path = archive_path(ctl, &found.course, &found.user)?;
        // The file only while the row still names it: an archive made again since is kept.
        let row = found.archive.clone();
        let (course, user) = (found.course.clone(), found.user.clone());
        let gone = ctl
            .db(move |conn| {
                conn.transaction(|conn| {
                    if !CourseArchive::delete_if_unchanged(conn, &row)? {
                        return Ok(false);
                    }
                    audit::record(
                        conn,
                        "system",
                        AuditAction::ArchiveExpired,
                        AuditObject::Course,
                        &course,
                        json!({"user": user, "sha256": row.sha256, "size_bytes": row.size_bytes,
                               "expires_at": row.expires_at}),
                    )?;
                    Ok(true)
                })
            })
            .await?;
        if gone {
            remove_file(&path);
            deleted += 1;
        }
    }
    Ok(deleted)
}
