//! Enums stored by name in the database. [`StepKind`]: what one item of an operation does, its
//! step, stored in `operation_items.action`; a name no step has is an error when the item is read.

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
