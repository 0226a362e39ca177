//! The list of wire types whose JSON Schema is published in `proto-schemas/schemas/`.
//! A test regenerates them and fails when a checked-in file differs.

use schemars::schema::RootSchema;
use schemars::schema_for;

/// `(file stem, schema)` for every published type.
pub fn all() -> Vec<(&'static str, RootSchema)> {
    vec![
        ("error", schema_for!(crate::ErrorBody)),
        ("join_token", schema_for!(crate::enroll::JoinToken)),
        ("enroll_request", schema_for!(crate::enroll::EnrollRequest)),
        (
            "enroll_response",
            schema_for!(crate::enroll::EnrollResponse),
        ),
        (
            "agent_create_instance",
            schema_for!(crate::agent::CreateInstance),
        ),
        ("agent_instance", schema_for!(crate::agent::Instance)),
        ("agent_inventory", schema_for!(crate::agent::Inventory)),
        ("agent_exec_request", schema_for!(crate::agent::ExecRequest)),
        ("agent_exec_result", schema_for!(crate::agent::ExecResult)),
    ]
}
