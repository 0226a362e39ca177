//! `course copy OLD NEW`: next term's course in one step. It takes the old course's image,
//! per-student limits, home size, GPU settings (GPU mode and GPU-hour budget included),
//! network policy, reclaim policy (its warning too), home snapshots, archive days, datasets,
//! notebook setting, quota (an admin's limit is not escaped by copying) and staff, under the
//! same instructor; not its students, containers, dates or state. Only the old course's
//! instructor or an admin; one transaction, so a refused copy leaves nothing behind.

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
use crate::db::models::course_archive::CourseArchive;
use crate::db::models::course_budget::CourseBudget;
use crate::db::models::course_dataset::{CourseDataset, NewCourseDataset};
use crate::db::models::course_network::CourseNetwork;
use crate::db::models::course_reclaim::CourseReclaim;
use crate::db::models::course_staff;
use crate::db::models::gpu_lease::CourseGpuMode;
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
                    gpu_memory_mib: from.gpu_memory_mib,
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
            let archive_days = CourseArchive::days_of(conn, from.id)?;
            CourseArchive::set_days_of(conn, to.id, archive_days)?;
            if let Some(reclaim) = CourseReclaim::of(conn, from.id)? {
                CourseReclaim::set(
                    conn,
                    &CourseReclaim {
                        course_id: to.id,
                        ..reclaim
                    },
                )?;
            }
            // GPU time: pinned or on demand, and the hours each student may use per period;
            // not the hours granted to last term's students.
            if let Some(mode) = CourseGpuMode::of(conn, from.id)? {
                CourseGpuMode::set(
                    conn,
                    &CourseGpuMode {
                        course_id: to.id,
                        ..mode
                    },
                )?;
            }
            if let Some(budget) = CourseBudget::of(conn, from.id)? {
                CourseBudget::set(
                    conn,
                    to.id,
                    Some(&CourseBudget {
                        course_id: to.id,
                        ..budget
                    }),
                )?;
            }
            let network = CourseNetwork::of(conn, from.id)?;
            CourseNetwork::set(conn, to.id, &network)?;
            let snapshots =
                crate::db::models::course_home_snapshots::CourseHomeSnapshots::of(conn, from.id)?;
            crate::db::models::course_home_snapshots::CourseHomeSnapshots::set(
                conn, to.id, snapshots,
            )?;
            for user in course_staff::user_ids(conn, from.id)? {
                course_staff::add(conn, to.id, user)?;
            }
            // Its datasets' current versions (the stored files are shared: one copy each) and
            // its data quota; they reach nodes when the new course's containers are made.
            let data_quota = CourseDataset::quota_mib(conn, from.id)?;
            CourseDataset::set_quota_mib(conn, to.id, data_quota)?;
            for (d, _) in CourseDataset::of_course(conn, from.id)? {
                CourseDataset::put(
                    conn,
                    &NewCourseDataset {
                        course_id: to.id,
                        name: &d.name,
                        sha256: &d.sha256,
                        size_bytes: d.size_bytes,
                        pushed_by: d.pushed_by,
                    },
                )?;
            }
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
