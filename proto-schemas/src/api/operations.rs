//! Operations: `GET /api/v1/operations` (own, or all for admins), `GET /api/v1/operations/{id}`,
//! `GET /api/v1/operations/{id}/wait?timeout=SECONDS` (answers when it ends or at the timeout,
//! default 30, at most 300).

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

#[cfg_attr(
    feature = "diesel",
    derive(diesel::AsExpression, diesel::FromSqlRow),
    diesel(sql_type = diesel::sql_types::Text)
)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OperationKind {
    CreateInstance,
    DeleteInstance,
    ChangeInstanceState,
    EvacuateNode,
    RestoreNode,
    PublishImage,
    ProvisionCourse,
    TeardownCourse,
    /// The reclaimer taking an idle instance's GPUs (`idle_action = detach`).
    DetachGpus,
    /// Every online node fetching an image ahead of a class (`cohort image distribute`).
    DistributeImage,
    /// One container and its home taken to another node (`cohort move NAME --target NODE`).
    MoveInstance,
    /// A course's new cores and memory applied to its containers already made, one item each.
    SetCourseLimits,
    /// A course's network policy applied to its containers already made, one item each.
    SetCourseNetwork,
    /// A person's logins (their keys or password, or none when disabled or deleted) applied to
    /// their running containers, one item each.
    ApplyLogins,
    /// A container no record describes (an orphan) deleted from its node, then its record.
    DeleteOrphan,
    /// A course's datasets brought to the nodes of its containers and mounted there
    /// (`cohort course data push|rm`).
    SyncCourseData,
    /// Every student's home of a course exported into the controller's archive store
    /// (`cohort course archive`), one item each.
    ArchiveCourse,
    /// A course's home snapshot schedule applied to its students' home volumes, one item each.
    SetCourseHomeSnapshots,
    /// A container's home volume restored from one of its snapshots.
    RestoreHome,
    /// A GPU lease granted: the GPU attached to the (running) container.
    AttachGpus,
    /// One path of a container's home snapshot copied into `~/restored/`, the container running.
    RestoreHomePath,
    /// A running container's GPUs taken by the reclaimer, attached again.
    AttachGpusAgain,
    /// A deleted catalog image's copies dropped from the nodes that held them, one item each.
    DropImage,
}

crate::named_enum!(OperationKind, "an operation kind" {
    CreateInstance => "create_instance",
    DeleteInstance => "delete_instance",
    ChangeInstanceState => "change_instance_state",
    EvacuateNode => "evacuate_node",
    RestoreNode => "restore_node",
    PublishImage => "publish_image",
    ProvisionCourse => "provision_course",
    TeardownCourse => "teardown_course",
    DetachGpus => "detach_gpus",
    DistributeImage => "distribute_image",
    MoveInstance => "move_instance",
    SetCourseLimits => "set_course_limits",
    SetCourseNetwork => "set_course_network",
    ApplyLogins => "apply_logins",
    DeleteOrphan => "delete_orphan",
    SyncCourseData => "sync_course_data",
    ArchiveCourse => "archive_course",
    SetCourseHomeSnapshots => "set_course_home_snapshots",
    RestoreHome => "restore_home",
    AttachGpus => "attach_gpus",
    RestoreHomePath => "restore_home_path",
    AttachGpusAgain => "attach_gpus_again",
    DropImage => "drop_image",
});

#[cfg_attr(
    feature = "diesel",
    derive(diesel::AsExpression, diesel::FromSqlRow),
    diesel(sql_type = diesel::sql_types::Text)
)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OperationStatus {
    Pending,
    Running,
    Success,
    Failure,
    Cancelled,
}

crate::named_enum!(OperationStatus, "an operation status" {
    Pending => "pending",
    Running => "running",
    Success => "success",
    Failure => "failure",
    Cancelled => "cancelled",
});

impl OperationStatus {
    /// True once the operation will change no more.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Success | Self::Failure | Self::Cancelled)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Operation {
    pub id: Uuid,
    pub kind: OperationKind,
    pub status: OperationStatus,
    /// Username of whoever started it.
    pub created_by: String,
    /// What it acts on: an instance, node, image or course name.
    pub target: String,
    pub progress: Progress,
    pub items: Vec<OperationItem>,
    pub error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Progress {
    pub total: u32,
    pub done: u32,
    pub failed: u32,
}

/// One step of an operation, e.g. one student's container in a course provision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OperationItem {
    /// Also the agent's idempotency key for this step.
    pub id: Uuid,
    /// The instance (or other object) this item acts on.
    pub target: String,
    pub node: Option<String>,
    pub ssh_port: Option<u16>,
    pub status: OperationStatus,
    pub attempts: u32,
    pub error: Option<String>,
}

/// Query of `/wait`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitQuery {
    /// Seconds; default 30, at most 300.
    #[serde(default)]
    pub timeout: Option<u32>,
}
