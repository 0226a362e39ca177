//! Courses: create, read, quota, students, and the shared rule of who may touch a course (its
//! instructor and admins; enrolled students may read it).

use chrono::{DateTime, NaiveDate, Utc};
use cohort_proto::agent::NetworkPolicy;
use cohort_proto::api::courses::{
    Course as WireCourse, CourseHome, CourseJupyter, CourseQuota, CreateCourse,
    Student as WireStudent,
};
use cohort_proto::api::instances::{GpuShare, ObservedState};
use cohort_proto::api::users::Role;
use diesel::prelude::*;
use serde_json::json;

use crate::accounts::auth::{Bearer, Caller};
use crate::app::state::Controller;
use crate::db::enums::{AuditAction, AuditObject, IdleAction};
use crate::db::models::audit;
use crate::db::models::course::{Course, NewCourse};
use crate::db::models::course_archive::CourseArchive;
use crate::db::models::course_network::CourseNetwork;
use crate::db::models::course_reclaim::{self, CourseReclaim};
use crate::db::models::enrollment::Enrollment;
use crate::db::models::image::Image;
use crate::db::models::instance::Instance;
use crate::db::models::user::User;
use crate::error::{ActionError, ActionResult};
use crate::placement::queue_reason::QUEUED;
use crate::validate;

/// Longest course code: leaves room for `-<username>` in a 63-character instance name.
const MAX_CODE: usize = 40;

/// Whether the caller holds course `course_id`'s instructor rights: they are its instructor or
/// on its staff, and hold the instructor role (staff rights never lift a role). Every check
/// of "is this the course's instructor" asks this.
pub fn teaches(conn: &mut PgConnection, caller: &Caller, course_id: i64) -> QueryResult<bool> {
    Ok(caller.role >= Role::Instructor
        && crate::db::models::course_staff::teaches(conn, course_id, caller.user.id)?)
}

/// The course, if the caller may change it (its instructor, its staff or an admin).
pub fn writable(conn: &mut PgConnection, caller: &Caller, code: &str) -> ActionResult<Course> {
    let course = Course::by_code(conn, code)?
        .ok_or_else(|| ActionError::NotFound(format!("course {code}")))?;
    if caller.is_admin() || teaches(conn, caller, course.id)? {
        Ok(course)
    } else {
        Err(ActionError::Forbidden(format!(
            "course {code} is not yours"
        )))
    }
}

/// The course, if the caller may delete it or hand out its instructor rights: its own
/// instructor or an admin, never its staff.
pub fn owned(conn: &mut PgConnection, caller: &Caller, code: &str) -> ActionResult<Course> {
    let course = writable(conn, caller, code)?;
    if caller.is_admin() || course.instructor_id == caller.user.id {
        Ok(course)
    } else {
        Err(ActionError::Forbidden(format!(
            "only the instructor of course {code} or an admin may do this"
        )))
    }
}

/// The course, if the caller may read it (also its students).
fn readable(conn: &mut PgConnection, caller: &Caller, code: &str) -> ActionResult<Course> {
    match writable(conn, caller, code) {
        Err(ActionError::Forbidden(msg)) => {
            let course = Course::by_code(conn, code)?
                .ok_or_else(|| ActionError::NotFound(format!("course {code}")))?;
            if Enrollment::is_enrolled(conn, course.id, caller.user.id)? {
                Ok(course)
            } else {
                Err(ActionError::Forbidden(msg))
            }
        }
        other => other,
    }
}

/// The instances of a course, by owner.
pub fn course_instances(conn: &mut PgConnection, course_id: i64) -> QueryResult<Vec<Instance>> {
    Instance::of_course(conn, course_id)
}

fn date(field: &str, value: Option<&str>) -> ActionResult<Option<DateTime<Utc>>> {
    let Some(value) = value else { return Ok(None) };
    if let Ok(t) = DateTime::parse_from_rfc3339(value) {
        return Ok(Some(t.with_timezone(&Utc)));
    }
    NaiveDate::parse_from_str(value, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| Some(t.and_utc()))
        .ok_or_else(|| ActionError::invalid(field, "must be YYYY-MM-DD or RFC 3339"))
}

/// A course's network policy checked: a 400 naming the field (`network.egress.allow[1]`, `network.ssh_from[0]`).
pub fn check_network(policy: &NetworkPolicy) -> ActionResult<()> {
    cohort_proto::validate::network_policy(policy)
        .map_err(|e| ActionError::invalid(&format!("network.{}", e.field), e.message))
}

/// The per-student cores, memory and root disk a course may give, when it is created and when
/// its limits are changed (`PUT /courses/{code}/limits`): a 400 naming the field.
pub fn check_size(
    cpu: Option<u32>,
    memory_mib: Option<u64>,
    disk_gib: Option<u64>,
) -> ActionResult<()> {
    for (field, value, most) in [
        ("cpu", cpu.map(u64::from), 256),
        ("memory_mib", memory_mib, 1 << 20),
        ("disk_gib", disk_gib, 1 << 14),
    ] {
        if value.is_some_and(|v| v == 0 || v > most) {
            return Err(ActionError::invalid(field, format!("must be 1 to {most}")));
        }
    }
    if let Some(memory) = memory_mib {
        validate::memory_mib("memory_mib", memory)?;
    }
    Ok(())
}

/// A new course's code and title: a 400 naming the field.
pub(super) fn check_code_and_title(code: &str, title: &str) -> ActionResult<()> {
    validate::instance_name("code", code)?;
    if code.len() > MAX_CODE {
        return Err(ActionError::invalid(
            "code",
            format!("must be at most {MAX_CODE} characters"),
        ));
    }
    cohort_proto::validate::title(title, 200).map_err(|e| ActionError::invalid("title", e.0))
}

fn check_create(req: &CreateCourse) -> ActionResult<()> {
    check_code_and_title(&req.code, &req.title)?;
    validate::text("image", &req.image)?;
    if let Some(model) = &req.gpu_model {
        validate::text("gpu_model", model)?;
    }
    check_size(req.cpu, req.memory_mib, req.disk_gib)?;
    if req.gpu_share.is_some_and(|v| v == 0 || v > 64) {
        return Err(ActionError::invalid("gpu_share", "must be 1 to 64"));
    }
    if req
        .processes
        .is_some_and(|p| !(64..=1_000_000).contains(&p))
    {
        return Err(ActionError::invalid("processes", "must be 64 to 1000000"));
    }
    crate::placement::home_size::check("home_mib", req.home_mib)?;
    if let Some(days) = req.archive_days {
        super::archive::check_days("archive_days", days)?;
    }
    if req.gpus.is_some_and(|g| g > 16) {
        return Err(ActionError::invalid("gpus", "must be 0 to 16"));
    }
    if let Some(mib) = req.gpu_memory_mib {
        if req.gpus.unwrap_or(0) == 0 || req.gpu_share.unwrap_or(1) < 2 {
            return Err(ActionError::invalid(
                "gpu_memory_mib",
                "caps a GPU shared by several students: only with gpus and gpu_share > 1",
            ));
        }
        if !(64..=1 << 20).contains(&mib) {
            return Err(ActionError::invalid(
                "gpu_memory_mib",
                "must be 64 to 1048576 (MiB)",
            ));
        }
    }
    // At most a year; 0 is refused rather than read as "at once".
    for (field, v) in [
        ("idle_gpu_minutes", req.idle_gpu_minutes),
        ("max_runtime_minutes", req.max_runtime_minutes),
    ] {
        if v.is_some_and(|m| m == 0 || m > 525_600) {
            return Err(ActionError::invalid(field, "must be 1 to 525600 minutes"));
        }
    }
    if let Some(m) = req.warn_minutes {
        warn_minutes(m)?;
    }
    if let Some(policy) = &req.network {
        check_network(policy)?;
    }
    idle_action(req)?;
    if req.gpu_hours_per_student.is_none() && req.budget_period.is_some() {
        return Err(ActionError::invalid(
            "budget_period",
            "a budget period needs gpu_hours_per_student",
        ));
    }
    super::budget::checked(req.gpu_hours_per_student, req.budget_period.as_deref())?;
    Ok(())
}

/// What the course's reclaimer does to an idle container; `stop` when the request names none.
fn idle_action(req: &CreateCourse) -> ActionResult<IdleAction> {
    match req.idle_action.as_deref() {
        None => Ok(IdleAction::Stop),
        Some(name) => name
            .parse()
            .map_err(|_| ActionError::invalid("idle_action", "must be stop or detach")),
    }
}

pub async fn create(
    ctl: &Controller,
    caller: Caller,
    req: CreateCourse,
) -> ActionResult<WireCourse> {
    caller.require(Role::Instructor)?;
    check_create(&req)?;
    let starts = date("starts", req.starts.as_deref())?;
    let ends = date("ends", req.ends.as_deref())?;
    if let (Some(s), Some(e)) = (starts, ends) {
        if e < s {
            return Err(ActionError::invalid("ends", "is before starts"));
        }
    }
    let home_snapshots =
        super::home_snapshots::parse(req.home_snapshots.as_deref(), req.home_snapshots_keep, None)?;
    // Kept with the course, so a later change of the controller's default leaves it alone.
    let archive_days = req.archive_days.unwrap_or(ctl.config.server.archive_days) as i32;
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let instructor = match &req.instructor {
                Some(name) if name != caller.name() => {
                    caller.require(Role::Admin)?;
                    let user = User::by_username(conn, name)?.ok_or_else(|| {
                        ActionError::invalid("instructor", format!("no user {name}"))
                    })?;
                    if user.role() < Role::Instructor {
                        return Err(ActionError::invalid(
                            "instructor",
                            format!("{name} is not an instructor"),
                        ));
                    }
                    user
                }
                _ => caller.user.clone(),
            };
            let image = Image::lookup(conn, &req.image)?
                .ok_or_else(|| ActionError::invalid("image", format!("no image {}", req.image)))?;
            validate::disk_for_image("disk_gib", req.disk_gib.unwrap_or(10), image.size_bytes)?;
            crate::images::check_gpu_ready(&image, req.gpus.unwrap_or(0), &req.image)?;
            let course = Course::insert(
                conn,
                &NewCourse {
                    code: &req.code,
                    title: &req.title,
                    instructor_id: instructor.id,
                    image_id: Some(image.id),
                    cpu: req.cpu.unwrap_or(1) as i32,
                    memory_mib: req.memory_mib.unwrap_or(1024) as i64,
                    disk_gib: req.disk_gib.unwrap_or(10) as i64,
                    gpus: req.gpus.unwrap_or(0) as i32,
                    gpu_model: req.gpu_model.as_deref(),
                    gpu_share: if req.gpu_share.unwrap_or(1) > 1 {
                        GpuShare::Shared
                    } else {
                        GpuShare::Exclusive
                    },
                    gpu_share_count: req.gpu_share.filter(|n| *n > 1).map(|n| n as i32),
                    processes: req.processes.map(|n| n as i32),
                    home_mib: req.home_mib.map(|n| n as i32),
                    gpu_memory_mib: req.gpu_memory_mib.map(|n| n as i64),
                    starts_at: starts,
                    ends_at: ends,
                },
            )
            .map_err(|e| ActionError::from_unique(e, "code", "a course with this code exists"))?;
            CourseReclaim::set(
                conn,
                &CourseReclaim {
                    course_id: course.id,
                    idle_gpu_minutes: req.idle_gpu_minutes.map(|m| m as i32),
                    idle_action: idle_action(&req)?,
                    max_runtime_minutes: req.max_runtime_minutes.map(|m| m as i32),
                    warn_minutes: req
                        .warn_minutes
                        .map_or(course_reclaim::DEFAULT_WARN_MINUTES, |m| m as i32),
                },
            )?;
            if let Some(policy) = &req.network {
                CourseNetwork::set(conn, course.id, policy)?;
            }
            super::budget::write(
                conn,
                course.id,
                super::budget::checked(req.gpu_hours_per_student, req.budget_period.as_deref())?,
            )?;
            crate::db::models::course_home_snapshots::CourseHomeSnapshots::set(
                conn,
                course.id,
                home_snapshots,
            )?;
            CourseArchive::set_days_of(conn, course.id, Some(archive_days))?;
            audit::record(
                conn,
                caller.name(),
                AuditAction::Create,
                AuditObject::Course,
                &course.code,
                json!({ "network": req.network }),
            )?;
            Ok(view(conn, &course)?)
        })
    })
    .await
}

pub fn view(conn: &mut PgConnection, c: &Course) -> QueryResult<WireCourse> {
    let instructor = User::username_of(conn, c.instructor_id)?;
    let image: Option<String> = match c.image_id {
        Some(id) => Some(Image::alias_of(conn, id)?),
        None => None,
    };
    let students = Enrollment::students(conn, c.id)?.len() as u32;
    let reclaim = CourseReclaim::of(conn, c.id)?.unwrap_or_default();
    let (gpu_hours_per_student, budget_period) = super::budget::shown(conn, c.id)?;
    let (gpu_mode, gpu_lease_max_hours) = crate::reclaim::leases::shown(conn, c.id)?;
    let (home_snapshots, home_snapshots_keep) = super::home_snapshots::wire(
        crate::db::models::course_home_snapshots::CourseHomeSnapshots::of(conn, c.id)?,
    );
    Ok(WireCourse {
        code: c.code.clone(),
        title: c.title.clone(),
        instructor,
        image,
        cpu: c.cpu as u32,
        memory_mib: c.memory_mib as u64,
        disk_gib: c.disk_gib as u64,
        gpus: c.gpus as u32,
        gpu_model: c.gpu_model.clone(),
        gpu_share: c.gpu_share.to_string(),
        gpu_share_count: c.gpu_share_count.map(|n| n as u32),
        processes: c.processes.map(|n| n as u32),
        home_mib: c.home_mib.map(|n| n as u64),
        home_snapshots,
        home_snapshots_keep,
        archive_days: CourseArchive::days_of(conn, c.id)?.map(|d| d as u32),
        gpu_memory_mib: c.gpu_memory_mib.map(|n| n as u64),
        jupyter_instructors: c.jupyter_instructors,
        starts_at: c.starts_at,
        ends_at: c.ends_at,
        state: c.state,
        students,
        quota: CourseQuota {
            max_students: c.quota_students.map(|v| v as u32),
            max_gpus: c.quota_gpus.map(|v| v as u32),
            max_memory_mib: c.quota_memory_mib.map(|v| v as u64),
        },
        idle_gpu_minutes: reclaim.idle_gpu_minutes.map(|m| m as u32),
        max_runtime_minutes: reclaim.max_runtime_minutes.map(|m| m as u32),
        idle_action: reclaim.idle_action.to_string(),
        network: CourseNetwork::of(conn, c.id)?,
        staff: crate::db::models::course_staff::usernames(conn, c.id)?,
        gpu_hours_per_student,
        budget_period,
        gpu_mode,
        gpu_lease_max_hours,
        warn_minutes: reclaim.warn_minutes as u32,
    })
}

pub async fn list(ctl: &Controller, bearer: Bearer) -> ActionResult<Vec<WireCourse>> {
    ctl.db_as(bearer, |conn, caller| {
        let rows = match caller.role {
            Role::Admin => Course::list(conn, None)?,
            Role::Instructor => Course::list(conn, Some(caller.user.id))?,
            Role::Student => Course::of_student(conn, caller.user.id)?,
        };
        Ok(rows
            .iter()
            .map(|c| view(conn, c))
            .collect::<QueryResult<_>>()?)
    })
    .await
}

pub async fn get(ctl: &Controller, bearer: Bearer, code: String) -> ActionResult<WireCourse> {
    ctl.db_as(bearer, move |conn, caller| {
        let course = readable(conn, &caller, &code)?;
        Ok(view(conn, &course)?)
    })
    .await
}

pub async fn set_quota(
    ctl: &Controller,
    caller: Caller,
    code: String,
    quota: CourseQuota,
) -> ActionResult<WireCourse> {
    caller.require(Role::Admin)?;
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let course = writable(conn, &caller, &code)?;
            Course::set_quota(
                conn,
                course.id,
                quota.max_students.map(|v| v as i32),
                quota.max_gpus.map(|v| v as i32),
                quota.max_memory_mib.map(|v| v as i64),
            )?;
            audit::record(
                conn,
                caller.name(),
                AuditAction::SetQuota,
                AuditObject::Course,
                &code,
                json!(quota),
            )?;
            let course = writable(conn, &caller, &code)?;
            Ok(view(conn, &course)?)
        })
    })
    .await
}

/// `PUT /courses/{code}/home` (its instructor, admin): the size of the students' home volumes,
/// which each home takes when its container is next made.
pub async fn set_home(
    ctl: &Controller,
    caller: Caller,
    code: String,
    home: CourseHome,
) -> ActionResult<WireCourse> {
    crate::placement::home_size::check("home_mib", home.home_mib)?;
    let placement = ctl.config.placement.clone();
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let course = writable(conn, &caller, &code)?;
            crate::placement::home_size::set(conn, course.id, home.home_mib, &placement)?;
            audit::record(
                conn,
                caller.name(),
                AuditAction::SetHome,
                AuditObject::Course,
                &code,
                json!(home),
            )?;
            let course = writable(conn, &caller, &code)?;
            Ok(view(conn, &course)?)
        })
    })
    .await
}

/// `PUT /courses/{code}/jupyter` (its instructor, admin): whether the course's instructors may
/// open its students' JupyterLab through the portal.
pub async fn set_jupyter(
    ctl: &Controller,
    caller: Caller,
    code: String,
    jupyter: CourseJupyter,
) -> ActionResult<WireCourse> {
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let course = writable(conn, &caller, &code)?;
            Course::set_jupyter_instructors(conn, course.id, jupyter.instructors)?;
            audit::record(
                conn,
                caller.name(),
                AuditAction::SetJupyter,
                AuditObject::Course,
                &code,
                json!(jupyter),
            )?;
            let course = writable(conn, &caller, &code)?;
            Ok(view(conn, &course)?)
        })
    })
    .await
}

pub async fn students(
    ctl: &Controller,
    caller: Caller,
    code: String,
) -> ActionResult<Vec<WireStudent>> {
    ctl.db(move |conn| {
        let course = writable(conn, &caller, &code)?;
        let by_owner = Instance::of_course_with_node(conn, course.id)?;
        Ok(Enrollment::students(conn, course.id)?
            .into_iter()
            .map(|s| {
                let mine = by_owner.iter().find(|(i, _)| i.owner_id == s.user.id);
                WireStudent {
                    username: s.user.username.clone(),
                    name: s.user.full_name.clone(),
                    email: s.user.email.clone(),
                    instance: mine.map(|(i, _)| i.name.clone()),
                    node: mine.and_then(|(_, n)| n.clone()),
                    ssh_port: mine.and_then(|(i, _)| i.ssh_port).map(|p| p as u16),
                    state: mine.map(|(i, _)| i.observed_state.to_string()),
                    queue_reason: mine
                        .filter(|(i, _)| i.observed_state == ObservedState::Queued)
                        .and_then(|(i, _)| i.error.as_deref())
                        .map(|e| e.strip_prefix(QUEUED).unwrap_or(e).trim().to_string()),
                }
            })
            .collect())
    })
    .await
}

/// `warn_minutes` as the course settings admit it: 0 (no warning) to a day.
fn warn_minutes(m: u32) -> ActionResult<i32> {
    if m > course_reclaim::MAX_WARN_MINUTES as u32 {
        return Err(ActionError::invalid(
            "warn_minutes",
            format!("must be 0 to {} minutes", course_reclaim::MAX_WARN_MINUTES),
        ));
    }
    Ok(m as i32)
}

/// `PUT /courses/{code}/reclaim-warning` (its instructor, staff, admin): the minutes of warning
/// before the course's reclaimer stops a container or detaches its GPUs; audited.
pub async fn set_reclaim_warning(
    ctl: &Controller,
    caller: Caller,
    code: String,
    req: cohort_proto::api::courses::CourseReclaimWarning,
) -> ActionResult<WireCourse> {
    let minutes = warn_minutes(req.warn_minutes)?;
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let course = writable(conn, &caller, &code)?;
            let policy = CourseReclaim::of(conn, course.id)?.unwrap_or(CourseReclaim {
                course_id: course.id,
                ..Default::default()
            });
            CourseReclaim::set(
                conn,
                &CourseReclaim {
                    warn_minutes: minutes,
                    ..policy
                },
            )?;
            audit::record(
                conn,
                caller.name(),
                AuditAction::SetReclaimWarning,
                AuditObject::Course,
                &code,
                json!(req),
            )?;
            Ok(view(conn, &course)?)
        })
    })
    .await
}
