//! Enums stored by name in the database. [`StepKind`]: what one item of an operation does, its
//! step, stored in `operation_items.action`; a name no step has is an error when the item is read.
//! [`IdleAction`]: a course's reclaim policy. [`AuditAction`] and [`AuditObject`]: what an audit
//! row says was done, to what. An instance's GPU share and placement strategy are the API's own
//! enums (`cohort_proto::api::instances::{GpuShare, PlacementStrategy}`), stored by the same names.

/// The step an item runs (see [`crate::jobs::step`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, diesel::AsExpression, diesel::FromSqlRow)]
#[diesel(sql_type = diesel::sql_types::Text)]
pub enum StepKind {
    /// Make the container on its node ([`crate::jobs::create`]).
    Create,
    /// Start, stop or restart it ([`crate::jobs::state`]); `EvacuateStop` is a forced stop.
    Start,
    Stop,
    Restart,
    EvacuateStop,
    /// Take it and its home to another node ([`crate::jobs::moves`]): a named one (`cohort move`,
    /// `restore`) or the one placement would choose (an evacuation).
    Move,
    EvacuateMove,
    /// Delete the container, keeping its home, for a `Create` after it ([`crate::jobs::reset`]).
    Reset,
    /// Export it as a catalog image ([`crate::jobs::publish`]).
    Publish,
    /// Take its GPUs off while it runs ([`crate::jobs::gpus`]).
    DetachGpus,
    /// Apply its row's cores and memory live ([`crate::jobs::resize`]).
    SetLimits,
    /// Bring an image onto the item's node ([`crate::jobs::import_image`]).
    ImportImage,
    /// Delete the container (and a torn-down course's home) and its row ([`crate::jobs::delete`]).
    Delete,
    /// Apply its course's stored network policy live ([`crate::jobs::access`]).
    ApplyNetworkPolicy,
    /// Apply its owner's current keys or password, or remove a disabled owner's login
    /// ([`crate::jobs::access`]).
    ApplySshKeys,
    /// Remove a former owner's login from it ([`crate::jobs::access`]).
    RevokeLogin,
    /// Delete a container no record describes from its node, then its orphan record
    /// ([`crate::jobs::orphans`]).
    DeleteOrphan,
    /// Bring a course's datasets onto the item's node and mount them in its containers there
    /// ([`crate::jobs::sync_data`]).
    SyncData,
    /// Export its home volume's files into the controller's archive store
    /// ([`crate::jobs::archive`]).
    ArchiveHome,
    /// Apply its course's home snapshot schedule to its home volume
    /// ([`crate::jobs::home_snapshots`]).
    SetHomeSnapshots,
    /// Restore its home volume from a snapshot ([`crate::jobs::home_snapshots`]).
    RestoreHome,
    /// Put its leased GPUs on while it runs ([`crate::jobs::gpus`]).
    AttachGpus,
    /// Copy one path of a home snapshot into its home's `restored/`
    /// ([`crate::jobs::home_snapshots`]).
    RestoreHomePath,
    /// Delete a catalog image deleted since from the item's node ([`crate::jobs::drop_image`]).
    DropImage,
}

cohort_proto::named_enum!(StepKind, "a step kind" {
    Create => "create",
    Start => "start",
    Stop => "stop",
    Restart => "restart",
    EvacuateStop => "evacuate_stop",
    Move => "move",
    EvacuateMove => "evacuate_move",
    Reset => "reset",
    Publish => "publish",
    DetachGpus => "detach_gpus",
    SetLimits => "set_limits",
    ImportImage => "import_image",
    Delete => "delete",
    ApplyNetworkPolicy => "apply_network_policy",
    ApplySshKeys => "apply_ssh_keys",
    RevokeLogin => "revoke_login",
    DeleteOrphan => "delete_orphan",
    SyncData => "sync_data",
    ArchiveHome => "archive_home",
    SetHomeSnapshots => "set_home_snapshots",
    RestoreHome => "restore_home",
    AttachGpus => "attach_gpus",
    RestoreHomePath => "restore_home_path",
    DropImage => "drop_image",
});

/// Stored by name in payloads too (an evacuation's policy is the step its items get).
impl serde::Serialize for StepKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for StepKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

/// What a course's reclaimer does to a container idle on its GPUs (`course_reclaim.idle_action`);
/// shown on the wire by name. A course without a policy row stops them.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, diesel::AsExpression, diesel::FromSqlRow,
)]
#[diesel(sql_type = diesel::sql_types::Text)]
pub enum IdleAction {
    /// Stop the container.
    #[default]
    Stop,
    /// Take its GPUs and leave it running ([`crate::jobs::gpus`]).
    Detach,
}

cohort_proto::named_enum!(IdleAction, "an idle action" {
    Stop => "stop",
    Detach => "detach",
});

/// What an audit row says was done (`audit_log.action`). Rows are written with these names only;
/// the log is read back as the text it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, diesel::AsExpression)]
#[diesel(sql_type = diesel::sql_types::Text)]
pub enum AuditAction {
    ApplyNetworkPolicy,
    ApplySshKeys,
    RevokeLogin,
    AddSshKey,
    AdoptOrphan,
    ChangePassword,
    Cordon,
    Create,
    CreateJoinToken,
    CreateUser,
    Delete,
    DeleteOrphan,
    DeleteSnapshot,
    DeleteSshKey,
    DetachGpus,
    Disable,
    Distribute,
    Drift,
    Enable,
    End,
    Enroll,
    Evacuate,
    EvacuateMove,
    EvacuateStop,
    Exec,
    FailedSignIn,
    Import,
    ImportImage,
    ImportRoster,
    IssueToken,
    Move,
    Moved,
    NodeCertificateConfirmed,
    NodeCertificateRenewed,
    Provision,
    Publish,
    Published,
    PutFile,
    Reactivate,
    ReissuePassword,
    Remove,
    RemoveStudent,
    RenameImage,
    Reset,
    Restart,
    Restore,
    RestoreSnapshot,
    RevokeToken,
    RosterKeyIgnored,
    SetHome,
    SetJupyter,
    SetLimits,
    SetNetwork,
    SetPassword,
    SetQuota,
    SetRole,
    ShowPasswords,
    SignIn,
    SignOut,
    Snapshot,
    Start,
    Stop,
    StudentReset,
    StudentRestart,
    StudentStart,
    StudentStop,
    Teardown,
    TrustCertificate,
    TrustToken,
    UntrustCertificate,
    Update,
    PushData,
    RemoveData,
    SetDataQuota,
    SyncData,
    AddStaff,
    RemoveStaff,
    CopyCourse,
    SetBudget,
    GrantGpuHours,
    BudgetWarning,
    Archive,
    ArchiveHome,
    ArchiveExpired,
    SetArchiveDays,
    SetHomeSnapshots,
    RestoreHome,
    SetGpuMode,
    RequestGpu,
    ReleaseGpu,
    AttachGpus,
    ReclaimWarning,
    KeepWorking,
    SetReclaimWarning,
    RestoreHomePath,
    SubmitJob,
    CancelJob,
    SetJobPriority,
    SetJobLimits,
    DropImage,
    RenameSnapshot,
}

cohort_proto::named_enum!(AuditAction, "an audit action" {
    ApplyNetworkPolicy => "apply_network_policy",
    ApplySshKeys => "apply_ssh_keys",
    RevokeLogin => "revoke_login",
    AddSshKey => "add_ssh_key",
    AdoptOrphan => "adopt_orphan",
    ChangePassword => "change_password",
    Cordon => "cordon",
    Create => "create",
    CreateJoinToken => "create_join_token",
    CreateUser => "create_user",
    Delete => "delete",
    DeleteOrphan => "delete_orphan",
    DeleteSnapshot => "delete_snapshot",
    DeleteSshKey => "delete_ssh_key",
    DetachGpus => "detach_gpus",
    Disable => "disable",
    Distribute => "distribute",
    Drift => "drift",
    Enable => "enable",
    End => "end",
    Enroll => "enroll",
    Evacuate => "evacuate",
    EvacuateMove => "evacuate_move",
    EvacuateStop => "evacuate_stop",
    Exec => "exec",
    FailedSignIn => "failed_sign_in",
    Import => "import",
    ImportImage => "import_image",
    ImportRoster => "import_roster",
    IssueToken => "issue_token",
    Move => "move",
    Moved => "moved",
    NodeCertificateConfirmed => "node_certificate_confirmed",
    NodeCertificateRenewed => "node_certificate_renewed",
    Provision => "provision",
    Publish => "publish",
    Published => "published",
    PutFile => "put_file",
    Reactivate => "reactivate",
    ReissuePassword => "reissue_password",
    Remove => "remove",
    RemoveStudent => "remove_student",
    RenameImage => "rename_image",
    Reset => "reset",
    Restart => "restart",
    Restore => "restore",
    RestoreSnapshot => "restore_snapshot",
    RevokeToken => "revoke_token",
    RosterKeyIgnored => "roster_key_ignored",
    SetHome => "set_home",
    SetJupyter => "set_jupyter",
    SetLimits => "set_limits",
    SetNetwork => "set_network",
    SetPassword => "set_password",
    SetQuota => "set_quota",
    SetRole => "set_role",
    ShowPasswords => "show_passwords",
    SignIn => "sign_in",
    SignOut => "sign_out",
    Snapshot => "snapshot",
    Start => "start",
    Stop => "stop",
    StudentReset => "student_reset",
    StudentRestart => "student_restart",
    StudentStart => "student_start",
    StudentStop => "student_stop",
    Teardown => "teardown",
    TrustCertificate => "trust_certificate",
    TrustToken => "trust_token",
    UntrustCertificate => "untrust_certificate",
    Update => "update",
    PushData => "push_data",
    RemoveData => "remove_data",
    SetDataQuota => "set_data_quota",
    SyncData => "sync_data",
    AddStaff => "add_staff",
    RemoveStaff => "remove_staff",
    CopyCourse => "copy_course",
    SetBudget => "set_budget",
    GrantGpuHours => "grant_gpu_hours",
    BudgetWarning => "budget_warning",
    Archive => "archive",
    ArchiveHome => "archive_home",
    ArchiveExpired => "archive_expired",
    SetArchiveDays => "set_archive_days",
    SetHomeSnapshots => "set_home_snapshots",
    RestoreHome => "restore_home",
    SetGpuMode => "set_gpu_mode",
    RequestGpu => "request_gpu",
    ReleaseGpu => "release_gpu",
    AttachGpus => "attach_gpus",
    ReclaimWarning => "reclaim_warning",
    KeepWorking => "keep_working",
    SetReclaimWarning => "set_reclaim_warning",
    RestoreHomePath => "restore_home_path",
    SubmitJob => "submit_job",
    CancelJob => "cancel_job",
    SetJobPriority => "set_job_priority",
    SetJobLimits => "set_job_limits",
    DropImage => "drop_image",
    RenameSnapshot => "rename_snapshot",
});

/// An operation is audited under the name of its step.
impl From<StepKind> for AuditAction {
    fn from(step: StepKind) -> Self {
        match step {
            StepKind::Create => AuditAction::Create,
            StepKind::Start => AuditAction::Start,
            StepKind::Stop => AuditAction::Stop,
            StepKind::Restart => AuditAction::Restart,
            StepKind::EvacuateStop => AuditAction::EvacuateStop,
            StepKind::Move => AuditAction::Move,
            StepKind::EvacuateMove => AuditAction::EvacuateMove,
            StepKind::Reset => AuditAction::Reset,
            StepKind::Publish => AuditAction::Publish,
            StepKind::DetachGpus => AuditAction::DetachGpus,
            StepKind::SetLimits => AuditAction::SetLimits,
            StepKind::ImportImage => AuditAction::ImportImage,
            StepKind::Delete => AuditAction::Delete,
            StepKind::ApplyNetworkPolicy => AuditAction::ApplyNetworkPolicy,
            StepKind::ApplySshKeys => AuditAction::ApplySshKeys,
            StepKind::RevokeLogin => AuditAction::RevokeLogin,
            StepKind::DeleteOrphan => AuditAction::DeleteOrphan,
            StepKind::SyncData => AuditAction::SyncData,
            StepKind::ArchiveHome => AuditAction::ArchiveHome,
            StepKind::SetHomeSnapshots => AuditAction::SetHomeSnapshots,
            StepKind::RestoreHome => AuditAction::RestoreHome,
            StepKind::AttachGpus => AuditAction::AttachGpus,
            StepKind::RestoreHomePath => AuditAction::RestoreHomePath,
            StepKind::DropImage => AuditAction::DropImage,
        }
    }
}

/// What kind of object an audit row names (`audit_log.object_kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, diesel::AsExpression)]
#[diesel(sql_type = diesel::sql_types::Text)]
pub enum AuditObject {
    Course,
    Gpu,
    Image,
    Instance,
    LxdCertificate,
    Node,
    Source,
    User,
}

cohort_proto::named_enum!(AuditObject, "an audit object kind" {
    Course => "course",
    Gpu => "gpu",
    Image => "image",
    Instance => "instance",
    LxdCertificate => "lxd_certificate",
    Node => "node",
    Source => "source",
    User => "user",
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_is_audited_under_its_own_name() {
        for step in StepKind::ALL {
            assert_eq!(AuditAction::from(*step).as_str(), step.as_str());
        }
    }
}
