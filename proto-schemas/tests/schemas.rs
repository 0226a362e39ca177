//! The checked-in JSON Schema files must match the types. `COHORT_BLESS=1 cargo test -p
//! cohort-proto` rewrites them after a deliberate change.

use std::path::PathBuf;

#[test]
fn checked_in_schemas_match_the_types() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("schemas");
    let bless = std::env::var_os("COHORT_BLESS").is_some();
    let mut stale = Vec::new();
    for (stem, schema) in cohort_proto::schema::all() {
        let path = dir.join(format!("{stem}.json"));
        let want = serde_json::to_string_pretty(&schema).expect("serialise schema") + "\n";
        if bless {
            std::fs::write(&path, &want).expect("write schema");
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(want.as_str()) {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "schemas out of date (run COHORT_BLESS=1 cargo test -p cohort-proto): {stale:?}"
    );
}

#[test]
fn join_token_round_trips_through_json() {
    let token = cohort_proto::enroll::JoinToken {
        controller_url: "https://127.0.0.1:8443".into(),
        ca_fingerprint: "ab".repeat(32),
        node_name: "gpu-01".into(),
        secret: "s3cret".into(),
        expires_at: chrono::DateTime::from_timestamp(1_800_000_000, 0).expect("timestamp"),
    };
    let json = serde_json::to_string(&token).expect("serialise");
    let back: cohort_proto::enroll::JoinToken = serde_json::from_str(&json).expect("parse");
    assert_eq!(back, token);
    let unknown = json.replacen('{', "{\"extra\":1,", 1);
    assert!(serde_json::from_str::<cohort_proto::enroll::JoinToken>(&unknown).is_err());
}
