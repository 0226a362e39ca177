//! Load and fuzzing against a real controller process: 200 concurrent clients on the list and get
//! routes for a bounded time (no 5xx, no error in the log), and a bounded schemathesis run over
//! the OpenAPI document (no 5xx, no response that breaks the documented schema).

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cohort_e2e::cluster::Cluster;

/// Seconds of load; `COHORT_LOAD_SECONDS` shortens it for a quick local run.
fn load_seconds() -> u64 {
    std::env::var("COHORT_LOAD_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60)
}

const CLIENTS: usize = 200;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_clients_on_list_and_get_routes() {
    let cluster = Cluster::start_with_env(0, &[("RUST_LOG", "info")]).await;
    let alice = cluster.user("alice", "student").await;
    let prof = cluster.user("prof", "instructor").await;
    let ca = std::fs::read(cluster.state.path().join("controller/ca.crt")).unwrap();
    let http = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
        .pool_max_idle_per_host(CLIENTS)
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let base = format!("{}/api/v1", cluster.controller.url());
    let admin = cluster.admin_token.clone();
    // (token, path) pairs every client cycles through: lists and gets of every role.
    let routes: Arc<Vec<(String, String)>> = Arc::new(vec![
        (admin.clone(), "/instances".into()),
        (admin.clone(), "/nodes".into()),
        (admin.clone(), "/gpus".into()),
        (admin.clone(), "/images".into()),
        (admin.clone(), "/users".into()),
        (admin.clone(), "/courses".into()),
        (admin.clone(), "/operations".into()),
        (admin.clone(), "/audit?limit=50".into()),
        (admin.clone(), "/me".into()),
        (alice.clone(), "/me".into()),
        (alice.clone(), "/instances".into()),
        (prof.clone(), "/courses".into()),
        (prof.clone(), "/instances?limit=10".into()),
        (admin.clone(), "/instances/nonexistent".into()),
    ]);
    let deadline = Instant::now() + Duration::from_secs(load_seconds());
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (http, base, routes) = (http.clone(), base.clone(), routes.clone());
            tokio::spawn(async move {
                let (mut ok, mut not_found, mut failures) = (0u64, 0u64, Vec::new());
                let mut i = c;
                while Instant::now() < deadline {
                    let (token, path) = &routes[i % routes.len()];
                    i += 1;
                    match http
                        .get(format!("{base}{path}"))
                        .bearer_auth(token)
                        .send()
                        .await
                    {
                        Ok(r) if r.status().is_success() => {
                            let _ = r.bytes().await;
                            ok += 1;
                        }
                        Ok(r) if r.status() == 404 && path.ends_with("nonexistent") => {
                            not_found += 1;
                        }
                        Ok(r) => failures.push(format!("{path}: {}", r.status())),
                        Err(e) => failures.push(format!("{path}: {e}")),
                    }
                }
                (ok, not_found, failures)
            })
        })
        .collect();
    let (mut ok, mut not_found, mut failures) = (0, 0, Vec::new());
    for t in tasks {
        let (o, n, f) = t.await.unwrap();
        ok += o;
        not_found += n;
        failures.extend(f);
    }
    assert!(
        failures.is_empty(),
        "{} of {} requests failed, e.g. {:?}",
        failures.len(),
        ok + not_found + failures.len() as u64,
        &failures[..failures.len().min(5)]
    );
    assert!(ok >= CLIENTS as u64, "only {ok} requests answered");
    assert!(not_found > 0, "the unknown instance was never asked for");
    let log = cluster.controller_log();
    let errors: Vec<&str> = log.lines().filter(|l| l.contains("ERROR")).collect();
    assert!(
        errors.is_empty(),
        "errors in the controller log:\n{}",
        errors.join("\n")
    );
    eprintln!(
        "{ok} answered, {not_found} expected 404s, {} s",
        load_seconds()
    );
}

/// schemathesis from PyPI, installed by scripts/setup into /opt/cohort-tools.
fn schemathesis() -> std::path::PathBuf {
    let st = std::path::PathBuf::from(
        std::env::var("COHORT_SCHEMATHESIS").unwrap_or_else(|_| "/opt/cohort-tools/bin/st".into()),
    );
    assert!(
        st.exists(),
        "schemathesis is not installed at {}; run scripts/setup",
        st.display()
    );
    st
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_no_server_error_and_no_schema_violation() {
    // The fuzzer guesses join secrets by design: no limit on failed authentications, so that
    // every example reaches its handler.
    let env = [
        ("RUST_LOG", "info"),
        ("COHORT_AUTH_FAILURES_PER_MINUTE", "0"),
    ];
    let cluster = Cluster::start_with_env(0, &env).await;
    cluster.user("alice", "student").await;
    cluster.user("prof", "instructor").await;
    let st = schemathesis();
    let ca = cluster.state.path().join("controller/ca.crt");
    let spec = format!("{}/api/v1/openapi.json", cluster.controller.url());
    let out = Command::new("timeout")
        .arg("600")
        .arg(&st)
        .args(["run", &spec])
        .args(["--url", &cluster.controller.url()])
        .args([
            "-H",
            &format!("Authorization: Bearer {}", cluster.admin_token),
        ])
        .args(["--checks", "not_a_server_error,response_schema_conformance"])
        .args(["--max-examples", "15", "--workers", "2"])
        .args(["--tls-verify", &ca.to_string_lossy()])
        .args(["--exclude-path-regex", "tarball|publish|/files$|/exec$"])
        .env("NO_COLOR", "1")
        .output()
        .expect("run schemathesis");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "schemathesis failed (exit {:?}):\n{text}",
        out.status.code()
    );
    // The summary says how many operations it tested: most of the document, not none.
    let tested: u32 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Tested: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no 'Tested:' line in schemathesis' summary:\n{text}"));
    assert!(
        tested >= 20,
        "schemathesis tested only {tested} operations:\n{text}"
    );
    assert!(text.contains(" passed"), "no passed test case:\n{text}");
    let log = cluster.controller_log();
    let panics: Vec<&str> = log.lines().filter(|l| l.contains("panicked")).collect();
    assert!(
        panics.is_empty(),
        "the controller panicked:\n{}",
        panics.join("\n")
    );
}
