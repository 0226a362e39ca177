//! The one error shape every Cohort HTTP endpoint returns:
//! `{"error": {"code": "...", "message": "...", "field": "..."}}`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorDetail {
    /// Stable machine-readable code, e.g. `invalid_field`, `not_found`, `conflict`, `lxd_error`.
    pub code: String,
    /// Human-readable message; LXD's own message is quoted verbatim inside it where one exists.
    pub message: String,
    /// The request field at fault, as a JSON path (`ssh.authorized_keys[0]`), when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}
