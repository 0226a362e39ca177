//! `course copy OLD NEW`: next term's course in one step. It takes the old course's image,
//! per-student limits, home size, GPU settings, network policy, reclaim policy, notebook
//! setting, quota (an admin's limit is not escaped by copying) and staff, under the same
//! instructor; not its students, containers, dates or state. Only the old course's instructor
//! or an admin; one transaction, so a refused copy leaves nothing behind.

use cohort_proto::api::courses::{CopyCourse, Course as WireCourse};
use cohort_proto::api::users::Role;
use diesel::prelude::*;
use serde_json::json;

use super::course::{check_code_and_title, owned, view};
use crate::accounts::auth::Caller;
use crate::app::state::Controller;
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::audit;
use crate::db::models::course::{Course, NewCourse};
use crate::db::models::course_network::CourseNetwork;
use crate::db::models::course_reclaim::CourseReclaim;
use crate::db::models::course_staff;
use crate::error::{ActionError, ActionResult};

/// `POST /courses/{code}/copy`.
pub async fn copy(
    ctl: &Controller,
    caller: Caller,
    old: String,
    req: CopyCourse,
) -> ActionResult<WireCourse> {
    caller.require(Role::Instructor)?;
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let from = owned(conn, &caller, &old)?;
            let title = req.title.clone().unwrap_or_else(|| from.title.clone());
            check_code_and_title(&req.code, &title)?;
            let to = Course::insert(
                conn,
                &NewCourse {
                    code: &req.code,
                    title: &title,
                    instructor_id: from.instructor_id,
                    image_id: from.image_id,
                    cpu: from.cpu,
                    memory_mib: from.memory_mib,
                    disk_gib: from.disk_gib,
                    gpus: from.gpus,
                    gpu_model: from.gpu_model.as_deref(),
                    gpu_share: from.gpu_share,
                    gpu_share_count: from.gpu_share_count,
                    processes: from.processes,
                    home_mib: from.home_mib,
                    starts_at: None,
                    ends_at: None,
                },
            )
            .map_err(|e| ActionError::from_unique(e, "code", "a course with this code exists"))?;
            Course::set_quota(
                conn,
                to.id,
                from.quota_students,
                from.quota_gpus,
                from.quota_memory_mib,
            )?;
            Course::set_jupyter_instructors(conn, to.id, from.jupyter_instructors)?;
            if let Some(reclaim) = CourseReclaim::of(conn, from.id)? {
                CourseReclaim::set(
                    conn,
                    &CourseReclaim {
                        course_id: to.id,
                        ..reclaim
                    },
                )?;
            }
            let network = CourseNetwork::of(conn, from.id)?;
            CourseNetwork::set(conn, to.id, &network)?;
            for user in course_staff::user_ids(conn, from.id)? {
                course_staff::add(conn, to.id, user)?;
            }
            // Datasets (issue 45): once a course has datasets, the new course takes the old
            // one's current versions here, in this transaction.
            audit::record(
                conn,
                caller.name(),
                AuditAction::CopyCourse,
                AuditObject::Course,
                &req.code,
                json!({ "from": old }),
            )?;
            let to = Course::lock(conn, to.id)?;
            Ok(view(conn, &to)?)
        })
    })
    .await
}
