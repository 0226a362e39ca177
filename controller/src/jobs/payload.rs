//! What each kind of operation carries: one typed payload per kind, stored in the operation's
//! `payload` column (JSON) beside its `kind`, and read back into the same type by
//! [`Operation::job`]. A payload that does not fit its kind fails the step that needs it,
//! with the reason; nothing is guessed from a missing field.

use cohort_proto::api::operations::OperationKind;
use serde::{Deserialize, Serialize};

use super::StepKind;
use crate::db::models::operation::Operation;

/// `create_instance`: the API's create, or the poller re-creating a container missing on
/// its node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Create {
    /// `drift` when the poller repairs what it saw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repair: Option<String>,
}

/// `delete_instance`: an owner's or admin's delete, a removed student, a reclaim, an account
/// deleted with its instances.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Delete {
    #[serde(default, skip_serializing_if = "is_false")]
    pub force: bool,
    /// Why the reclaimer deleted it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The deleted account that owned it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub former_owner: Option<String>,
    /// A removed student's home volume goes with the container (`student remove --delete-home`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub delete_home: bool,
}

/// `change_instance_state`: a start, stop or restart asked for, a student action, a reclaim's
/// stop or a drift repaired.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChangeState {
    #[serde(default, skip_serializing_if = "is_false")]
    pub force: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<u32>,
    /// Why the reclaimer stopped it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The GPU slots go back once it is stopped (a reclaim: they are for whoever waits).
    #[serde(default, skip_serializing_if = "is_false")]
    pub release_gpus: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repair: Option<String>,
}

/// `evacuate_node`: the step each of its instances gets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Evacuate {
    pub policy: StepKind,
}

/// `move_instance` and `restore_node`: the node the instances go to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MoveTo {
    pub target: String,
}

/// `publish_image`: the catalog alias and description of the new image.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Publish {
    pub alias: String,
    #[serde(default)]
    pub description: Option<String>,
}

/// `provision_course`, `set_course_limits` and `set_course_network`: the course.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OfCourse {
    pub course: String,
}

/// `restore_home`: the snapshot its one item's home goes back to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestoreHome {
    pub snapshot: String,
}

/// `restore_home_path`: the snapshot and the path (relative to the home) its one item copies
/// into the home's `restored/`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestoreHomePath {
    pub snapshot: String,
    pub path: String,
}

/// `teardown_course`: whether the containers are deleted (else stopped), and their homes kept.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Teardown {
    pub delete: bool,
    #[serde(default)]
    pub keep_homes: bool,
    #[serde(default)]
    pub force: bool,
    /// Each container's home is archived first (an `archive_home` step before its own).
    #[serde(default, skip_serializing_if = "is_false")]
    pub archive: bool,
}

/// `detach_gpus`: why the reclaimer took them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reclaimed {
    pub reason: String,
}

/// `attach_gpus`: the lease whose GPU is attached.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Leased {
    pub lease: i64,
}

/// `distribute_image`: the catalog image every item's node fetches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Distribute {
    pub image_id: i64,
    pub fingerprint: String,
}

/// `drop_image`: the deleted catalog image whose copy every item's node drops (by fingerprint,
/// as the catalog row is gone).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DropImage {
    pub fingerprint: String,
    pub alias: String,
}

/// `apply_logins`: whose logins its items apply (an `apply_ssh_keys` item reads the owner's
/// keys, password and state when it runs; a `revoke_login` item takes this user's login out of
/// a container no longer theirs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Logins {
    pub user: String,
}

/// `delete_orphan`: the container no record describes, and its node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrphanOnNode {
    pub node: String,
    pub name: String,
}

/// `archive_course`: the course, and how many days its archives are kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Archive {
    pub course: String,
    pub days: u32,
}

fn is_false(b: &bool) -> bool {
    !b
}

/// How a `start`, `stop` or `restart` step changes its container.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StateOptions {
    pub force: bool,
    pub timeout_s: Option<u32>,
    /// A stop gives the instance's GPU slots back.
    pub release_gpus: bool,
}

/// An operation's kind with its payload.
#[derive(Debug, Clone, PartialEq)]
pub enum Job {
    CreateInstance(Create),
    DeleteInstance(Delete),
    ChangeInstanceState(ChangeState),
    EvacuateNode(Evacuate),
    RestoreNode(MoveTo),
    PublishImage(Publish),
    ProvisionCourse(OfCourse),
    TeardownCourse(Teardown),
    DetachGpus(Reclaimed),
    DistributeImage(Distribute),
    MoveInstance(MoveTo),
    SetCourseLimits(OfCourse),
    SetCourseNetwork(OfCourse),
    ApplyLogins(Logins),
    /// Its one item names the orphan (`target`) and its node.
    DeleteOrphan(OrphanOnNode),
    /// One item per node holding the course's containers.
    SyncCourseData(OfCourse),
    /// One item per student's container with a home.
    ArchiveCourse(Archive),
    /// One item per container of the course made on a node.
    SetCourseHomeSnapshots(OfCourse),
    RestoreHome(RestoreHome),
    AttachGpus(Leased),
    RestoreHomePath(RestoreHomePath),
    /// Its one item takes the running container's GPU slots again and puts its devices back.
    AttachGpusAgain,
    /// One item per node that held the deleted image.
    DropImage(DropImage),
}

impl Job {
    pub fn kind(&self) -> OperationKind {
        match self {
            Job::CreateInstance(_) => OperationKind::CreateInstance,
            Job::DeleteInstance(_) => OperationKind::DeleteInstance,
            Job::ChangeInstanceState(_) => OperationKind::ChangeInstanceState,
            Job::EvacuateNode(_) => OperationKind::EvacuateNode,
            Job::RestoreNode(_) => OperationKind::RestoreNode,
            Job::PublishImage(_) => OperationKind::PublishImage,
            Job::ProvisionCourse(_) => OperationKind::ProvisionCourse,
            Job::TeardownCourse(_) => OperationKind::TeardownCourse,
            Job::DetachGpus(_) => OperationKind::DetachGpus,
            Job::DistributeImage(_) => OperationKind::DistributeImage,
            Job::MoveInstance(_) => OperationKind::MoveInstance,
            Job::SetCourseLimits(_) => OperationKind::SetCourseLimits,
            Job::SetCourseNetwork(_) => OperationKind::SetCourseNetwork,
            Job::ApplyLogins(_) => OperationKind::ApplyLogins,
            Job::DeleteOrphan(_) => OperationKind::DeleteOrphan,
            Job::SyncCourseData(_) => OperationKind::SyncCourseData,
            Job::ArchiveCourse(_) => OperationKind::ArchiveCourse,
            Job::SetCourseHomeSnapshots(_) => OperationKind::SetCourseHomeSnapshots,
            Job::RestoreHome(_) => OperationKind::RestoreHome,
            Job::AttachGpus(_) => OperationKind::AttachGpus,
            Job::RestoreHomePath(_) => OperationKind::RestoreHomePath,
            Job::AttachGpusAgain => OperationKind::AttachGpusAgain,
            Job::DropImage(_) => OperationKind::DropImage,
        }
    }

    /// The `payload` column.
    pub fn payload(&self) -> serde_json::Value {
        let value = match self {
            Job::CreateInstance(p) => serde_json::to_value(p),
            Job::DeleteInstance(p) => serde_json::to_value(p),
            Job::ChangeInstanceState(p) => serde_json::to_value(p),
            Job::EvacuateNode(p) => serde_json::to_value(p),
            Job::RestoreNode(p) | Job::MoveInstance(p) => serde_json::to_value(p),
            Job::PublishImage(p) => serde_json::to_value(p),
            Job::ProvisionCourse(p)
            | Job::SetCourseLimits(p)
            | Job::SetCourseNetwork(p)
            | Job::SyncCourseData(p)
            | Job::SetCourseHomeSnapshots(p) => serde_json::to_value(p),
            Job::ApplyLogins(p) => serde_json::to_value(p),
            Job::DeleteOrphan(p) => serde_json::to_value(p),
            Job::TeardownCourse(p) => serde_json::to_value(p),
            Job::DetachGpus(p) => serde_json::to_value(p),
            Job::DistributeImage(p) => serde_json::to_value(p),
            Job::ArchiveCourse(p) => serde_json::to_value(p),
            Job::RestoreHome(p) => serde_json::to_value(p),
            Job::AttachGpus(p) => serde_json::to_value(p),
            Job::RestoreHomePath(p) => serde_json::to_value(p),
            Job::DropImage(p) => serde_json::to_value(p),
            Job::AttachGpusAgain => Ok(serde_json::json!({})),
        };
        value.expect("a payload of plain fields serializes")
    }

    /// Reads a payload stored under `kind`.
    pub fn read(kind: OperationKind, payload: &serde_json::Value) -> serde_json::Result<Job> {
        use serde_json::from_value as read;
        let p = payload.clone();
        Ok(match kind {
            OperationKind::CreateInstance => Job::CreateInstance(read(p)?),
            OperationKind::DeleteInstance => Job::DeleteInstance(read(p)?),
            OperationKind::ChangeInstanceState => Job::ChangeInstanceState(read(p)?),
            OperationKind::EvacuateNode => Job::EvacuateNode(read(p)?),
            OperationKind::RestoreNode => Job::RestoreNode(read(p)?),
            OperationKind::PublishImage => Job::PublishImage(read(p)?),
            OperationKind::ProvisionCourse => Job::ProvisionCourse(read(p)?),
            OperationKind::TeardownCourse => Job::TeardownCourse(read(p)?),
            OperationKind::DetachGpus => Job::DetachGpus(read(p)?),
            OperationKind::DistributeImage => Job::DistributeImage(read(p)?),
            OperationKind::MoveInstance => Job::MoveInstance(read(p)?),
            OperationKind::SetCourseLimits => Job::SetCourseLimits(read(p)?),
            OperationKind::SetCourseNetwork => Job::SetCourseNetwork(read(p)?),
            OperationKind::ApplyLogins => Job::ApplyLogins(read(p)?),
            OperationKind::DeleteOrphan => Job::DeleteOrphan(read(p)?),
            OperationKind::SyncCourseData => Job::SyncCourseData(read(p)?),
            OperationKind::ArchiveCourse => Job::ArchiveCourse(read(p)?),
            OperationKind::SetCourseHomeSnapshots => Job::SetCourseHomeSnapshots(read(p)?),
            OperationKind::RestoreHome => Job::RestoreHome(read(p)?),
            OperationKind::AttachGpus => Job::AttachGpus(read(p)?),
            OperationKind::RestoreHomePath => Job::RestoreHomePath(read(p)?),
            OperationKind::AttachGpusAgain => Job::AttachGpusAgain,
            OperationKind::DropImage => Job::DropImage(read(p)?),
        })
    }

    /// How a `start`, `stop` or `restart` step of this job changes the container.
    pub fn state_change(&self) -> StateOptions {
        match self {
            Job::ChangeInstanceState(c) => StateOptions {
                force: c.force,
                timeout_s: c.timeout_s,
                release_gpus: c.release_gpus,
            },
            Job::TeardownCourse(t) => StateOptions {
                force: t.force,
                ..StateOptions::default()
            },
            _ => StateOptions::default(),
        }
    }

    /// The node a `move` step takes its instance to; `None` where placement chooses it (an
    /// evacuation).
    pub fn move_target(&self) -> Option<&str> {
        match self {
            Job::MoveInstance(to) | Job::RestoreNode(to) => Some(&to.target),
            _ => None,
        }
    }

    /// Whose login a `revoke_login` step takes out (an `apply_logins` job's user).
    pub fn login_user(&self) -> Option<&str> {
        match self {
            Job::ApplyLogins(l) => Some(&l.user),
            _ => None,
        }
    }

    /// Whether a `delete` step of this job deletes a course student's home volume too: a
    /// course teardown that deletes without `keep_homes`, or a student removed with
    /// `delete_home`.
    pub fn wipes_homes(&self) -> bool {
        match self {
            Job::TeardownCourse(t) => t.delete && !t.keep_homes,
            Job::DeleteInstance(d) => d.delete_home,
            _ => false,
        }
    }
}

impl Operation {
    /// This operation's kind and payload, typed.
    pub fn job(&self) -> serde_json::Result<Job> {
        Job::read(self.kind, &self.payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_read_back_as_written_and_as_stored_before() {
        let jobs = [
            Job::ChangeInstanceState(ChangeState {
                force: true,
                reason: Some("idle".into()),
                release_gpus: true,
                ..Default::default()
            }),
            Job::EvacuateNode(Evacuate {
                policy: StepKind::EvacuateMove,
            }),
            Job::TeardownCourse(Teardown {
                delete: true,
                keep_homes: false,
                force: true,
                archive: true,
            }),
            Job::DistributeImage(Distribute {
                image_id: 7,
                fingerprint: "ab".into(),
            }),
        ];
        for job in jobs {
            assert_eq!(Job::read(job.kind(), &job.payload()).unwrap(), job);
        }
        // Rows written before payloads were typed read the same.
        let stored = serde_json::json!({"force": true, "timeout_s": null, "reason": "idle",
                                        "release_gpus": true});
        let job = Job::read(OperationKind::ChangeInstanceState, &stored).unwrap();
        let expected = StateOptions {
            force: true,
            timeout_s: None,
            release_gpus: true,
        };
        assert_eq!(job.state_change(), expected);
        let stored = serde_json::json!({"policy": "evacuate_stop"});
        let job = Job::read(OperationKind::EvacuateNode, &stored).unwrap();
        assert_eq!(
            job,
            Job::EvacuateNode(Evacuate {
                policy: StepKind::EvacuateStop
            })
        );
    }

    #[test]
    fn a_payload_that_does_not_fit_its_kind_is_an_error() {
        let e = Job::read(
            OperationKind::DistributeImage,
            &serde_json::json!({"fingerprint": "ab"}),
        )
        .unwrap_err();
        assert!(e.to_string().contains("image_id"), "{e}");
        let e = Job::read(
            OperationKind::TeardownCourse,
            &serde_json::json!({"delete": true, "keep_home": true}),
        )
        .unwrap_err();
        assert!(e.to_string().contains("keep_home"), "{e}");
    }

    #[test]
    fn only_a_deleting_teardown_without_keep_homes_wipes_homes() {
        let teardown = |delete, keep_homes| {
            Job::TeardownCourse(Teardown {
                delete,
                keep_homes,
                force: true,
                archive: false,
            })
        };
        assert!(teardown(true, false).wipes_homes());
        assert!(!teardown(true, true).wipes_homes());
        assert!(!teardown(false, false).wipes_homes());
        assert!(!Job::DeleteInstance(Delete::default()).wipes_homes());
        assert!(Job::DeleteInstance(Delete {
            delete_home: true,
            ..Delete::default()
        })
        .wipes_homes());
    }
}
