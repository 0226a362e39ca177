//! Typed request bodies for Cohort's own API, so that a renamed or retyped wire field breaks a
//! test at compile time rather than at run time.

pub use cohort_proto::api::courses::CreateCourse;
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
