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
        ("agent_arrival", schema_for!(crate::agent::Arrival)),
        (
            "agent_update_instance",
            schema_for!(crate::agent::UpdateInstance),
        ),
        ("agent_attach_gpus", schema_for!(crate::agent::AttachGpus)),
        ("agent_live_limits", schema_for!(crate::agent::LiveLimits)),
        (
            "agent_publish_instance",
            schema_for!(crate::agent::PublishInstance),
        ),
        ("agent_inventory", schema_for!(crate::agent::Inventory)),
        (
            "agent_instance_activity",
            schema_for!(crate::activity::InstanceActivity),
        ),
        ("agent_identity", schema_for!(crate::agent::IdentityInfo)),
        ("agent_identity_csr", schema_for!(crate::agent::IdentityCsr)),
        (
            "agent_install_certificate",
            schema_for!(crate::agent::InstallCertificate),
        ),
        ("agent_exec_request", schema_for!(crate::agent::ExecRequest)),
        ("agent_exec_result", schema_for!(crate::agent::ExecResult)),
        (
            "agent_exec_session_request",
            schema_for!(crate::agent::ExecSessionRequest),
        ),
        ("agent_exec_session", schema_for!(crate::agent::ExecSession)),
        (
            "agent_exec_session_state",
            schema_for!(crate::agent::ExecSessionState),
        ),
        (
            "agent_import_dataset",
            schema_for!(crate::agent::ImportDataset),
        ),
        (
            "agent_instance_datasets",
            schema_for!(crate::agent::InstanceDatasets),
        ),
        (
            "agent_prune_datasets",
            schema_for!(crate::agent::PruneDatasets),
        ),
        ("api_node", schema_for!(crate::api::nodes::Node)),
        (
            "api_create_join_token",
            schema_for!(crate::api::nodes::CreateJoinToken),
        ),
        (
            "api_join_token_issued",
            schema_for!(crate::api::nodes::JoinTokenIssued),
        ),
        (
            "api_evacuate_node",
            schema_for!(crate::api::nodes::EvacuateNode),
        ),
        ("api_gpu", schema_for!(crate::api::gpus::Gpu)),
        ("api_orphan", schema_for!(crate::api::orphans::Orphan)),
        (
            "api_adopt_orphan",
            schema_for!(crate::api::orphans::AdoptOrphan),
        ),
        ("api_update_gpu", schema_for!(crate::api::gpus::UpdateGpu)),
        ("api_image", schema_for!(crate::api::images::Image)),
        (
            "api_publish_image",
            schema_for!(crate::api::images::PublishImage),
        ),
        (
            "api_image_patch",
            schema_for!(crate::api::images::ImagePatch),
        ),
        (
            "api_image_distribution",
            schema_for!(crate::api::images::ImageDistribution),
        ),
        (
            "api_dataset_pushed",
            schema_for!(crate::api::course_data::DatasetPushed),
        ),
        (
            "api_data_usage",
            schema_for!(crate::api::course_data::DataUsage),
        ),
        (
            "api_archive_course",
            schema_for!(crate::api::course_archives::ArchiveCourse),
        ),
        (
            "api_course_archive",
            schema_for!(crate::api::course_archives::CourseArchive),
        ),
        (
            "api_gpu_lease_request",
            schema_for!(crate::api::gpu_leases::GpuLeaseRequest),
        ),
        (
            "api_gpu_lease",
            schema_for!(crate::api::gpu_leases::GpuLease),
        ),
        (
            "api_course_job_limits",
            schema_for!(crate::api::courses::CourseJobLimits),
        ),
        (
            "api_submit_job",
            schema_for!(crate::api::batch_jobs::SubmitJob),
        ),
        ("api_job", schema_for!(crate::api::batch_jobs::Job)),
        ("api_job_log", schema_for!(crate::api::batch_jobs::JobLog)),
        (
            "api_job_priority",
            schema_for!(crate::api::batch_jobs::JobPriority),
        ),
        (
            "api_course_gpu_mode",
            schema_for!(crate::api::courses::CourseGpuMode),
        ),
        (
            "api_create_instance",
            schema_for!(crate::api::instances::CreateInstance),
        ),
        ("api_instance", schema_for!(crate::api::instances::Instance)),
        (
            "api_update_instance",
            schema_for!(crate::api::instances::UpdateInstance),
        ),
        (
            "api_live_config",
            schema_for!(crate::api::instances::LiveConfig),
        ),
        (
            "api_move_instance",
            schema_for!(crate::api::instances::MoveInstance),
        ),
        (
            "api_instance_state_change",
            schema_for!(crate::api::instances::InstanceStateChange),
        ),
        (
            "api_operation",
            schema_for!(crate::api::operations::Operation),
        ),
        ("api_user", schema_for!(crate::api::users::User)),
        (
            "api_create_user",
            schema_for!(crate::api::users::CreateUser),
        ),
        (
            "api_api_token_issued",
            schema_for!(crate::api::users::ApiTokenIssued),
        ),
        ("api_api_token", schema_for!(crate::api::users::ApiToken)),
        (
            "api_user_deleted",
            schema_for!(crate::api::users::UserDeleted),
        ),
        (
            "api_issued_password",
            schema_for!(crate::api::courses::IssuedPassword),
        ),
        ("api_me", schema_for!(crate::api::users::Me)),
        ("api_add_ssh_key", schema_for!(crate::api::users::AddSshKey)),
        (
            "api_create_trust_token",
            schema_for!(crate::api::lxd_trust::CreateTrustToken),
        ),
        (
            "api_trust_token_issued",
            schema_for!(crate::api::lxd_trust::TrustTokenIssued),
        ),
        (
            "api_trust_entry",
            schema_for!(crate::api::lxd_trust::TrustEntry),
        ),
    ]
}
