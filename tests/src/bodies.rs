//! Typed request bodies for Cohort's own API, so that a renamed or retyped wire field breaks a
//! test at compile time rather than at run time.

pub use cohort_proto::agent::{CreateSnapshot, ExecRequest};
use cohort_proto::api::batch_jobs::SubmitJob;
pub use cohort_proto::api::courses::CreateCourse;
use cohort_proto::api::courses::{CourseBudget, CourseGpuMode, GpuHours, Teardown};
pub use cohort_proto::api::gpu_leases::GpuLeaseRequest;
pub use cohort_proto::api::images::PublishImage;
pub use cohort_proto::api::instances::CreateInstance;
pub use cohort_proto::api::instances::InstanceStateChange;
pub use cohort_proto::api::instances::StateAction;
pub use cohort_proto::api::instances::UpdateInstance;
use cohort_proto::api::instances::{GpuShare, Limits, PlacementStrategy};
pub use cohort_proto::api::nodes::CreateJoinToken;
pub use cohort_proto::api::orphans::AdoptOrphan;
pub use cohort_proto::api::users::Role;
use cohort_proto::api::users::{CreateApiToken, CreateUser};

use serde::Serialize;
use serde_json::Value;

/// A typed body as the JSON value a helper taking `Value` sends (the same bytes on the wire).
pub fn to_json(body: &impl Serialize) -> Value {
    serde_json::to_value(body).expect("a request body serializes")
}

/// `POST /courses` with its code, title and image and every optional field unset; the test
/// sets the others by struct update (`CreateCourse { memory_mib: Some(256), ..course(..) }`).
pub fn course(code: &str, title: &str, image: &str) -> CreateCourse {
    CreateCourse {
        code: code.into(),
        title: title.into(),
        image: image.into(),
        cpu: None,
        memory_mib: None,
        disk_gib: None,
        gpus: None,
        gpu_model: None,
        gpu_share: None,
        processes: None,
        home_mib: None,
        home_snapshots: None,
        home_snapshots_keep: None,
        archive_days: None,
        gpu_memory_mib: None,
        starts: None,
        ends: None,
        instructor: None,
        idle_gpu_minutes: None,
        max_runtime_minutes: None,
        idle_action: None,
        network: None,
        gpu_hours_per_student: None,
        budget_period: None,
        warn_minutes: None,
    }
}

/// `PUT /courses/{code}/gpu-mode` to `on-demand` with the longest lease in hours.
pub fn on_demand(max_hours: f64) -> CourseGpuMode {
    CourseGpuMode {
        gpu_mode: "on-demand".into(),
        gpu_lease_max_hours: Some(GpuHours(max_hours)),
    }
}

/// `PUT /courses/{code}/budget`: GPU hours per student and budget period.
pub fn budget(hours: f64, period: &str) -> CourseBudget {
    CourseBudget {
        gpu_hours_per_student: Some(GpuHours(hours)),
        budget_period: Some(period.into()),
    }
}

/// `POST /instances/{name}/gpu-lease` for this many hours.
pub fn gpu_lease(hours: f64) -> GpuLeaseRequest {
    GpuLeaseRequest {
        hours: Some(GpuHours(hours)),
    }
}

/// `POST /courses/{code}/teardown`: delete the containers (`delete`), keeping the homes
/// (`keep_homes`); no archive.
pub fn teardown(delete: bool, keep_homes: bool) -> Teardown {
    Teardown {
        delete,
        keep_homes,
        archive: false,
    }
}

/// `POST /instances` of `name` from `image`, every other field at the value the controller
/// takes when it is absent (no GPU, spread, queued and started).
pub fn instance(name: &str, image: &str) -> CreateInstance {
    CreateInstance {
        name: name.into(),
        image: image.into(),
        limits: None,
        gpus: 0,
        gpu_model: None,
        gpu_share: GpuShare::default(),
        config: Default::default(),
        owner: None,
        node: None,
        strategy: PlacementStrategy::default(),
        priority: 0,
        queue: true,
        start: true,
    }
}

/// An instance's limits.
pub fn limits(cpu: u32, memory_mib: u64, disk_gib: u64) -> Limits {
    Limits {
        cpu,
        memory_mib,
        disk_gib,
    }
}

/// `POST /jobs`: run `command` in `instance`, without a GPU, in its home, no environment.
pub fn job(instance: &str, command: &[&str]) -> SubmitJob {
    SubmitJob {
        instance: instance.into(),
        command: command.iter().map(|c| c.to_string()).collect(),
        gpus: None,
        hours: None,
        workdir: None,
        environment: Default::default(),
    }
}

/// `PUT /instances/{name}/state`: `action`, no timeout, not forced.
pub fn state_change(action: StateAction) -> InstanceStateChange {
    InstanceStateChange {
        action,
        timeout_s: None,
        force: false,
    }
}

/// `POST /users`: an account `username` with `role`, no name or email.
pub fn new_user(username: &str, role: Role) -> CreateUser {
    CreateUser {
        username: username.into(),
        role,
        full_name: None,
        email: None,
    }
}

/// `POST /users/{name}/tokens` or `/me/tokens`: a token named `name`, the default lifetime.
pub fn api_token(name: &str) -> CreateApiToken {
    CreateApiToken {
        name: Some(name.into()),
        expires_in_days: None,
    }
}

/// `POST /instances/{name}/exec`: run `command`, no environment, as root in `/`, the default
/// timeout.
pub fn exec(command: &[&str]) -> ExecRequest {
    ExecRequest::new(command.iter().map(|c| c.to_string()).collect())
}

/// `POST /instances/{name}/snapshots` named `name`.
pub fn snapshot(name: &str) -> CreateSnapshot {
    CreateSnapshot { name: name.into() }
}

/// `PATCH /instances/{name}` setting these config keys, nothing else.
pub fn set_config(pairs: &[(&str, &str)]) -> UpdateInstance {
    UpdateInstance {
        config: pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    }
}

/// `POST /images/publish` of stopped `instance` as `alias`, no description.
pub fn publish(instance: &str, alias: &str) -> PublishImage {
    PublishImage {
        instance: instance.into(),
        alias: alias.into(),
        description: None,
    }
}

/// `POST /nodes/tokens`: a join token for node `name`, whose agent is reached at `addresses`;
/// the default lifetime.
pub fn join_token(name: &str, addresses: &[String]) -> CreateJoinToken {
    CreateJoinToken {
        node_name: name.into(),
        ttl_seconds: None,
        addresses: addresses.to_vec(),
    }
}

/// `POST /instances/{name}/gpu-lease` for the course's default hours.
pub fn default_lease() -> GpuLeaseRequest {
    GpuLeaseRequest { hours: None }
}
