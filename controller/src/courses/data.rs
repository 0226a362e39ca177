//! Course datasets: a tarball pushed once by the course's staff, stored on the controller under
//! its SHA-256 (the data store, `COHORT_DATA_DIR`), then brought to every node holding the
//! course's containers and mounted at `/data/NAME` (the `sync_data` step). A push streams to a
//! temporary file while it is hashed and counted against the course's data quota; nothing is
//! recorded, and the file goes, unless the whole tarball arrived, hashed as the pusher said,
//! and passed the check of [`super::data_tar`].

use std::io::Write;
use std::path::PathBuf;

use cohort_proto::api::course_data::{
    DataQuota, DataUsage, Dataset, DatasetPushed, PushDatasetQuery,
};
use cohort_proto::api::users::Role;
use diesel::prelude::*;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::data_tar;
use crate::accounts::auth::{Bearer, Caller};
use crate::app::state::Controller;
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::audit;
use crate::db::models::course::Course;
use crate::db::models::course_dataset::{CourseDataset, NewCourseDataset};
use crate::db::models::node_certificate::NodeCertificate;
use crate::db::models::operation_item::OperationItem;
use crate::db::models::user::User;
use crate::error::{ActionError, ActionResult};
use crate::images::catalog::TarballReader;
use crate::jobs::{enqueue, payload, Audit, Step, StepKind};
use crate::views;

/// The custom volume holding a dataset version on a node (the agent's `dataset-` prefix).
pub fn dataset_volume(sha256: &str) -> String {
    format!("dataset-{}", &sha256[..sha256.len().min(48)])
}

/// Whether `user` may push, replace and remove `course`'s datasets and mounts them read-write:
/// an admin, or its staff (its instructor, or an instructor on its `course staff` list); the one
/// place that rule is decided.
pub fn may_write_course_data(
    conn: &mut PgConnection,
    user: &User,
    course: &Course,
) -> QueryResult<bool> {
    Ok(user.role() == Role::Admin
        || (user.role() >= Role::Instructor
            && crate::db::models::course_staff::teaches(conn, course.id, user.id)?))
}

/// The course `code` if the caller may write its data.
fn writable(conn: &mut PgConnection, caller: &Caller, code: &str) -> ActionResult<Course> {
    let course = Course::by_code(conn, code)?
        .ok_or_else(|| ActionError::NotFound(format!("course {code}")))?;
    if may_write_course_data(conn, &caller.user, &course)? {
        Ok(course)
    } else {
        Err(ActionError::Forbidden(format!(
            "course {code}'s data is not yours to change"
        )))
    }
}

/// A dataset's name: its directory under `/data`.
pub fn check_name(name: &str) -> ActionResult<()> {
    let ok = !name.is_empty()
        && name.len() <= 32
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && !name.starts_with('.');
    if ok {
        Ok(())
    } else {
        Err(ActionError::invalid(
            "name",
            format!(
                "{name:?} is not a dataset name: 1 to 32 letters, digits, '-', '_' or '.', \
                 not starting with '.' (no '/')"
            ),
        ))
    }
}

fn wire(course: &str, d: CourseDataset, pushed_by: Option<String>) -> Dataset {
    Dataset {
        course: course.to_string(),
        name: d.name,
        sha256: d.sha256,
        size_bytes: d.size_bytes as u64,
        pushed_by,
        pushed_at: d.pushed_at,
    }
}

/// The course's quota in bytes.
fn quota_bytes(conn: &mut PgConnection, default_mib: u64, course_id: i64) -> ActionResult<u64> {
    let mib = CourseDataset::quota_mib(conn, course_id)?.map_or(default_mib, |m| m as u64);
    Ok(mib << 20)
}

/// Enqueues the step that brings the course's nodes in line with its datasets; `None` when no
/// node holds its containers.
fn enqueue_sync(
    conn: &mut PgConnection,
    caller: &Caller,
    course: &Course,
    action: AuditAction,
    detail: serde_json::Value,
) -> ActionResult<Option<cohort_proto::api::operations::Operation>> {
    let nodes = CourseDataset::nodes_of_course(conn, course.id)?;
    audit::record(
        conn,
        caller.name(),
        action,
        AuditObject::Course,
        &course.code,
        detail,
    )?;
    if nodes.is_empty() {
        return Ok(None);
    }
    let steps: Vec<Step<'_>> = nodes
        .iter()
        .map(|node| Step::new(StepKind::SyncData, node, None))
        .collect();
    let op = enqueue(
        conn,
        &payload::Job::SyncCourseData(payload::OfCourse {
            course: course.code.clone(),
        }),
        Some(caller.user.id),
        &course.code,
        &steps,
        Some(Audit {
            actor: caller.name(),
            action: AuditAction::SyncData,
            object_kind: AuditObject::Course,
            object: &course.code,
            detail: json!({ "nodes": nodes }),
        }),
    )?;
    for item in OperationItem::for_operation(conn, op.id)? {
        OperationItem::set_node(conn, item.id, &item.target)?;
    }
    Ok(Some(views::operation(conn, &op)?))
}

/// A push in progress: bytes go to a temporary file in the data store while their SHA-256 is
/// computed, up to what the course's quota leaves.
pub struct DatasetPush {
    file: tempfile::NamedTempFile,
    hasher: Sha256,
    size: u64,
    /// Bytes the quota leaves for this dataset (the others' sizes taken off).
    room: u64,
    quota: u64,
    course: Course,
    query: PushDatasetQuery,
}

impl DatasetPush {
    /// Checks the caller, the name and the quota before any byte is stored.
    pub async fn begin(
        ctl: &Controller,
        caller: &Caller,
        code: String,
        query: PushDatasetQuery,
    ) -> ActionResult<DatasetPush> {
        check_name(&query.name)?;
        if let Some(sha) = &query.sha256 {
            if sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(ActionError::invalid("sha256", "64 hexadecimal digits"));
            }
        }
        let (caller2, name) = (caller.clone(), query.name.clone());
        let default_mib = ctl.config.server.data_quota_mib;
        let (course, quota, used) = ctl
            .db(move |conn| {
                let course = writable(conn, &caller2, &code)?;
                let quota = quota_bytes(conn, default_mib, course.id)?;
                let used = CourseDataset::used_bytes(conn, course.id, &name)? as u64;
                Ok((course, quota, used))
            })
            .await?;
        let dir = ctl.data_dir();
        std::fs::create_dir_all(&dir)?;
        Ok(DatasetPush {
            file: tempfile::NamedTempFile::new_in(dir)?,
            hasher: Sha256::new(),
            size: 0,
            room: quota.saturating_sub(used),
            quota,
            course,
            query,
        })
    }

    pub fn write(&mut self, chunk: &[u8]) -> ActionResult<()> {
        self.size += chunk.len() as u64;
        if self.size > self.room {
            return Err(ActionError::invalid(
                "quota",
                format!(
                    "the push is past course {}'s data quota of {} MiB ({} MiB left for this dataset)",
                    self.course.code,
                    self.quota >> 20,
                    self.room >> 20
                ),
            ));
        }
        self.hasher.update(chunk);
        self.file.write_all(chunk)?;
        Ok(())
    }

    /// Checks the tarball, stores it under its SHA-256, records the version and enqueues its
    /// distribution.
    pub async fn finish(self, ctl: &Controller, caller: Caller) -> ActionResult<DatasetPushed> {
        if self.size == 0 {
            return Err(ActionError::invalid("body", "the dataset tarball is empty"));
        }
        let sha256 = hex::encode(self.hasher.finalize());
        if let Some(said) = &self.query.sha256 {
            if !said.eq_ignore_ascii_case(&sha256) {
                return Err(ActionError::invalid(
                    "sha256",
                    format!("the body's SHA-256 is {sha256}, not {said}"),
                ));
            }
        }
        let upload = self.file.path().to_path_buf();
        tokio::task::spawn_blocking(move || data_tar::check(&upload))
            .await
            .map_err(|e| ActionError::Internal(e.to_string()))?
            .map_err(|e| ActionError::invalid("body", e.to_string()))?;
        self.file
            .persist(ctl.dataset_tarball(&sha256))
            .map_err(|e| ActionError::Io(e.error))?;
        let (course, name, size) = (self.course, self.query.name, self.size as i64);
        let sha = sha256.clone();
        let (pushed, replaced) = ctl
            .db(move |conn| {
                conn.transaction(|conn| {
                    let (row, old) = CourseDataset::put(
                        conn,
                        &NewCourseDataset {
                            course_id: course.id,
                            name: &name,
                            sha256: &sha,
                            size_bytes: size,
                            pushed_by: Some(caller.user.id),
                        },
                    )?;
                    let operation = enqueue_sync(
                        conn,
                        &caller,
                        &course,
                        AuditAction::PushData,
                        json!({"name": name, "sha256": sha, "size_bytes": size, "replaced": old}),
                    )?;
                    let replaced = match old.filter(|o| *o != sha) {
                        Some(o) if !CourseDataset::version_used(conn, &o)? => Some(o),
                        _ => None,
                    };
                    Ok((
                        DatasetPushed {
                            dataset: wire(&course.code, row, Some(caller.name().to_string())),
                            operation,
                        },
                        replaced,
                    ))
                })
            })
            .await?;
        if let Some(old) = replaced {
            remove_file(ctl.dataset_tarball(&old))?;
        }
        Ok(pushed)
    }
}

fn remove_file(path: PathBuf) -> ActionResult<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
        _ => Ok(()),
    }
}

/// The course's datasets and quota, if `caller` may write them.
fn usage(
    conn: &mut PgConnection,
    caller: &Caller,
    code: &str,
    default_mib: u64,
) -> ActionResult<DataUsage> {
    let course = writable(conn, caller, code)?;
    let datasets: Vec<Dataset> = CourseDataset::of_course(conn, course.id)?
        .into_iter()
        .map(|(d, by)| wire(&course.code, d, by))
        .collect();
    Ok(DataUsage {
        quota_mib: quota_bytes(conn, default_mib, course.id)? >> 20,
        used_bytes: datasets.iter().map(|d| d.size_bytes).sum(),
        datasets,
    })
}

/// `GET /api/v1/courses/{code}/data` (staff, admin).
pub async fn list(ctl: &Controller, bearer: Bearer, code: String) -> ActionResult<DataUsage> {
    let default_mib = ctl.config.server.data_quota_mib;
    ctl.db_as(bearer, move |conn, caller| {
        usage(conn, &caller, &code, default_mib)
    })
    .await
}

/// `DELETE /api/v1/courses/{code}/data/{name}` (staff, admin): the containers lose the mount
/// and the nodes the volume, through the same step as a push.
pub async fn remove(
    ctl: &Controller,
    caller: Caller,
    code: String,
    name: String,
) -> ActionResult<Option<cohort_proto::api::operations::Operation>> {
    check_name(&name)?;
    let (operation, gone) = ctl
        .db(move |conn| {
            conn.transaction(|conn| {
                let course = writable(conn, &caller, &code)?;
                let dataset = CourseDataset::find(conn, course.id, &name)?.ok_or_else(|| {
                    ActionError::NotFound(format!("dataset {name} of course {code}"))
                })?;
                CourseDataset::delete(conn, dataset.id)?;
                let op = enqueue_sync(
                    conn,
                    &caller,
                    &course,
                    AuditAction::RemoveData,
                    json!({"name": name, "sha256": dataset.sha256}),
                )?;
                let unused = !CourseDataset::version_used(conn, &dataset.sha256)?;
                Ok((op, unused.then_some(dataset.sha256)))
            })
        })
        .await?;
    if let Some(sha) = gone {
        remove_file(ctl.dataset_tarball(&sha))?;
    }
    Ok(operation)
}

/// `PUT /api/v1/courses/{code}/data-quota` (admin).
pub async fn set_quota(
    ctl: &Controller,
    caller: Caller,
    code: String,
    req: DataQuota,
) -> ActionResult<DataUsage> {
    caller.require(Role::Admin)?;
    let mib = req
        .quota_mib
        .map(|m| i64::try_from(m).map_err(|_| ActionError::invalid("quota_mib", "too large")))
        .transpose()?;
    let default_mib = ctl.config.server.data_quota_mib;
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let course = Course::by_code(conn, &code)?
                .ok_or_else(|| ActionError::NotFound(format!("course {code}")))?;
            CourseDataset::set_quota_mib(conn, course.id, mib)?;
            audit::record(
                conn,
                caller.name(),
                AuditAction::SetDataQuota,
                AuditObject::Course,
                &course.code,
                json!({ "quota_mib": mib }),
            )?;
            usage(conn, &caller, &code, default_mib)
        })
    })
    .await
}

/// The stored tarball of version `sha256` once the reader is allowed: a live node certificate,
/// or an admin.
pub async fn tarball(
    ctl: &Controller,
    reader: TarballReader,
    sha256: String,
) -> ActionResult<PathBuf> {
    let path = ctl.dataset_tarball(&sha256);
    ctl.db_once(move |conn| {
        match reader {
            TarballReader::Person(caller) => caller.require(Role::Admin)?,
            TarballReader::NodeCertificate(fp) => {
                if NodeCertificate::live_by_fingerprint(conn, &fp)?.is_none() {
                    return Err(ActionError::Forbidden(
                        "this node certificate is revoked or unknown".into(),
                    ));
                }
            }
        }
        if !CourseDataset::version_used(conn, &sha256)? {
            return Err(ActionError::NotFound(format!("dataset version {sha256}")));
        }
        Ok(path)
    })
    .await
}
