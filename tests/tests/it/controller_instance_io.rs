//! What a caller does to a running instance through the controller, against a real agent and
//! real LXD: large downloads and exec output stream within their limits, an exec that times out
//! leaves nothing running, bad exec arguments, config growth and host paths that lead to the
//! host's `/` are refused naming the field, and a caller's mistake LXD refuses is a 4xx.

use std::time::{Duration, Instant};

use base64::Engine;
use cohort_e2e::bodies::{
    self, instance, new_user, state_change, to_json, CreateInstance, InstanceStateChange, Role,
    StateAction,
};
use cohort_e2e::cluster::Cluster;
use cohort_proto::api::images::Image;
use cohort_proto::api::instances::ExecResult;
use cohort_proto::api::nodes::Node;
use cohort_proto::api::operations::Operation;
use cohort_proto::api::users::{ApiTokenIssued, CreateApiToken};
use cohort_proto::ErrorBody;
use reqwest::Method as M;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// The limits the controller runs with here.
const FILE_LIMIT_MIB: u64 = 192;
const EXEC_LIMIT_MIB: u64 = 1;

/// What went wrong, every check run before the test fails (so one run shows them all).
#[derive(Default)]
struct Findings(Vec<String>);

impl Findings {
    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.0.push(what());
        }
    }
}

/// A call whatever its outcome: status and body.
async fn raw(
    cluster: &Cluster,
    token: &str,
    method: M,
    path: &str,
    body: Option<Value>,
) -> (u16, String) {
    let mut req = cluster.request(method, path, token);
    if let Some(body) = body {
        req = req.json(&body);
    }
    let resp = req.send().await.expect("send");
    (
        resp.status().as_u16(),
        resp.text().await.unwrap_or_default(),
    )
}

fn error(body: &str) -> Option<ErrorBody> {
    serde_json::from_str(body).ok()
}

/// The answer is `status` with the JSON error naming `field`.
fn refused(answer: &(u16, String), status: u16, field: &str) -> bool {
    answer.0 == status && error(&answer.1).is_some_and(|e| e.error.field.as_deref() == Some(field))
}

/// Peak resident memory of a process, in bytes (`VmHWM`).
fn peak_rss(pid: u32) -> u64 {
    cohort_e2e::observe::proc_status_kib(pid, "VmHWM").expect("VmHWM") * 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn instance_io_is_bounded_and_wrong_input_refused() {
    let limits = [
        ("COHORT_FILE_LIMIT_MIB", FILE_LIMIT_MIB.to_string()),
        ("COHORT_EXEC_OUTPUT_LIMIT_MIB", EXEC_LIMIT_MIB.to_string()),
    ];
    let env: Vec<(&str, &str)> = limits.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut cluster = Cluster::start_with_env(0, &env).await;
    let image: Image =
        serde_json::from_value(cluster.import_base_image("cohort/base").await).expect("an image");
    cluster.add_node("node-io").await;
    let admin = &cluster.admin_token;
    let (controller, node) = (&cluster.controller, &cluster.nodes[0]);
    let lxd = &node.lxd;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let n: Node = cluster.call(admin, M::GET, "/nodes/node-io", None).await;
        if n.last_heartbeat_at.is_some() && n.cores > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "node never polled: {n:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let _: Value = cluster
        .call(
            admin,
            M::POST,
            "/users",
            Some(to_json(&new_user("alice", Role::Student))),
        )
        .await;
    let alice: ApiTokenIssued = cluster
        .call(
            admin,
            M::POST,
            "/users/alice/tokens",
            Some(to_json(&CreateApiToken::default())),
        )
        .await;
    let alice = alice.token;
    let op: Operation = cluster
        .call(
            &alice,
            M::POST,
            "/instances",
            Some(to_json(&CreateInstance {
                limits: Some(bodies::limits(1, 512, 2)),
                ..instance("io-alice", &image.alias)
            })),
        )
        .await;
    cluster.succeeds(&alice, &op).await;
    let mut found = Findings::default();
    let exec = |command: Value| {
        let cluster = &cluster;
        let alice = alice.clone();
        async move {
            raw(
                cluster,
                &alice,
                M::POST,
                "/instances/io-alice/exec",
                Some(command),
            )
            .await
        }
    };

    // A download larger than anything the controller should hold streams through, whole.
    let big = 160u64 << 20;
    let made = exec(to_json(&bodies::exec(&[
        "sh",
        "-c",
        &format!("head -c {big} /dev/urandom > /root/big && sha256sum /root/big"),
    ])))
    .await;
    assert_eq!(made.0, 200, "{}", made.1);
    let made: ExecResult = serde_json::from_str(&made.1).unwrap();
    let inside = String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(made.stdout_base64)
            .unwrap(),
    )
    .unwrap();
    let before = peak_rss(controller.pid());
    let mut resp = cluster
        .request(M::GET, "/instances/io-alice/files?path=/root/big", &alice)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let (mut hasher, mut size) = (Sha256::new(), 0u64);
    while let Some(chunk) = resp.chunk().await.expect("download") {
        hasher.update(&chunk);
        size += chunk.len() as u64;
    }
    let grew = peak_rss(controller.pid()).saturating_sub(before);
    found.check(size == big, || format!("downloaded {size} of {big} bytes"));
    found.check(inside.starts_with(&hex::encode(hasher.finalize())), || {
        "the download's content differs from the file".into()
    });
    found.check(grew < 48 << 20, || {
        format!(
            "the controller's peak memory grew {} MiB for a {} MiB download",
            grew >> 20,
            big >> 20
        )
    });

    // Past the file limit: a clear 413 naming the path, not a truncated file.
    let over = exec(to_json(&bodies::exec(&[
        "truncate",
        "-s",
        &format!("{}M", FILE_LIMIT_MIB + 1),
        "/root/huge",
    ])))
    .await;
    assert_eq!(over.0, 200, "{}", over.1);
    let pulled = raw(
        &cluster,
        &alice,
        M::GET,
        "/instances/io-alice/files?path=/root/huge",
        None,
    )
    .await;
    found.check(refused(&pulled, 413, "path"), || {
        format!("a file past the limit: {} {:.200}", pulled.0, pulled.1)
    });

    // Exec output within the limit comes back whole; past it, a clear 413 naming the stream.
    let within = exec(to_json(&bodies::exec(&[
        "sh",
        "-c",
        "head -c 900000 /dev/zero; echo err >&2",
    ])))
    .await;
    let out: Option<ExecResult> = serde_json::from_str(&within.1).ok();
    found.check(
        out.as_ref().is_some_and(|o| {
            let b64 = base64::engine::general_purpose::STANDARD;
            b64.decode(&o.stdout_base64)
                .is_ok_and(|b| b == vec![0u8; 900000])
                && b64.decode(&o.stderr_base64).is_ok_and(|b| b == b"err\n")
        }),
        || format!("900 kB of output: {} {:.200}", within.0, within.1),
    );
    let flood = exec(to_json(&bodies::exec(&[
        "head",
        "-c",
        "3000000",
        "/dev/zero",
    ])))
    .await;
    found.check(refused(&flood, 413, "stdout"), || {
        format!("3 MB of output: {} {:.200}", flood.0, flood.1)
    });

    // No exec leaves its output on the host (LXD keeps exec logs until they are deleted).
    let logs = cohort_e2e::lxd::lxc(&[
        "query",
        &format!("/1.0/instances/io-alice/logs?project={}", lxd.project()),
    ]);
    found.check(!logs.contains("exec_"), || {
        format!("exec logs left on the host: {logs}")
    });

    // A NUL no command can carry is the caller's 400, naming the argument.
    for (body, field) in [
        (json!({"command": ["echo", "a\u{0}b"]}), "command.1"),
        (
            json!({"command": ["env"], "environment": {"A": "x\u{0}"}}),
            "environment.A",
        ),
    ] {
        let answer = exec(body.clone()).await;
        found.check(refused(&answer, 400, field), || {
            format!("{body}: {} {:.200}", answer.0, answer.1)
        });
    }

    // A timed-out exec answers 504 and leaves nothing of itself running.
    let slow = exec(to_json(&bodies::ExecRequest {
        timeout_s: Some(2),
        ..bodies::exec(&["sh", "-c", "sleep 3001 & sleep 3002"])
    }))
    .await;
    found.check(slow.0 == 504, || {
        format!("timeout: {} {:.200}", slow.0, slow.1)
    });
    let mut left = String::new();
    for _ in 0..20 {
        left = lxd.lxc(&["exec", "io-alice", "--", "ps", "-eo", "args"]);
        if !left.contains("sleep 300") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    found.check(!left.contains("sleep 300"), || {
        format!("the timed-out command still runs:\n{left}")
    });

    // user.* keys are bounded in count and in bytes, per request and over requests.
    let keys = |from: usize, n: usize, len: usize| -> Value {
        (from..from + n)
            .map(|i| (format!("user.k{i}"), json!("v".repeat(len))))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let patch = |config: Value| {
        let cluster = &cluster;
        let alice = alice.clone();
        async move {
            raw(
                cluster,
                &alice,
                M::PATCH,
                "/instances/io-alice",
                Some(json!({"config": config})),
            )
            .await
        }
    };
    let many = patch(keys(0, 65, 1)).await;
    found.check(refused(&many, 400, "config"), || {
        format!("65 keys: {} {:.200}", many.0, many.1)
    });
    let first = patch(keys(0, 10, 4000)).await;
    found.check(first.0 == 200, || {
        format!("40 kB of keys: {} {:.200}", first.0, first.1)
    });
    let second = patch(keys(10, 10, 4000)).await;
    found.check(refused(&second, 400, "config"), || {
        format!(
            "80 kB of keys over two requests: {} {:.200}",
            second.0, second.1
        )
    });
    let shown = lxd.lxc(&["config", "show", "io-alice"]);
    found.check(!shown.contains("user.k10"), || {
        "the refused keys reached LXD".into()
    });

    // A config value LXD refuses is the caller's 400 naming the key, not the node's 502.
    let bad = patch(json!({"limits.processes": "abc"})).await;
    found.check(refused(&bad, 400, "config.limits.processes"), || {
        format!("a value LXD refuses: {} {:.200}", bad.0, bad.1)
    });

    // Host paths: nothing that leads to the host's / or to Cohort's or LXD's state.
    let host = tempfile::tempdir().expect("host dir");
    std::fs::set_permissions(
        host.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    std::fs::write(host.path().join("shared.txt"), "shared\n").unwrap();
    let links = tempfile::tempdir().expect("links");
    std::os::unix::fs::symlink("/", links.path().join("root")).unwrap();
    std::os::unix::fs::symlink(&node.state_dir, links.path().join("agent")).unwrap();
    let device = |source: &str| json!({"add_devices": {"h": {"type": "disk", "source": source, "path": "/mnt/h"}}});
    for source in [
        "/proc/self/root".to_string(),
        "/proc/1/root".into(),
        links.path().join("root").display().to_string(),
        links.path().join("agent").display().to_string(),
        node.state_dir.display().to_string(),
        cluster.controller_dir().display().to_string(),
        "/var/lib/lxd".into(),
    ] {
        let answer = raw(
            &cluster,
            admin,
            M::PATCH,
            "/instances/io-alice",
            Some(device(&source)),
        )
        .await;
        found.check(refused(&answer, 400, "devices.h.source"), || {
            format!("disk source {source}: {} {:.200}", answer.0, answer.1)
        });
    }
    let shown = lxd.lxc(&["config", "device", "show", "io-alice"]);
    found.check(!shown.contains("/mnt/h"), || {
        format!("a refused disk was added:\n{shown}")
    });
    let source = host.path().display().to_string();
    let good = raw(
        &cluster,
        admin,
        M::PATCH,
        "/instances/io-alice",
        Some(device(&source)),
    )
    .await;
    found.check(good.0 == 200, || {
        format!("a plain host dir: {} {:.200}", good.0, good.1)
    });
    if good.0 == 200 {
        let seen = lxd.lxc(&["exec", "io-alice", "--", "cat", "/mnt/h/shared.txt"]);
        found.check(seen == "shared\n", || {
            format!("the mounted dir shows {seen:?}")
        });
    }

    // A push into a directory that does not exist: the path is missing, not the instance.
    let push = cluster
        .request(
            M::PUT,
            "/instances/io-alice/files?path=/no/such/dir/f",
            &alice,
        )
        .body("x")
        .send()
        .await
        .unwrap();
    let push = (
        push.status().as_u16(),
        push.text().await.unwrap_or_default(),
    );
    found.check(
        refused(&push, 404, "path") && !push.1.contains("instance io-alice not found"),
        || format!("push into a missing dir: {} {:.200}", push.0, push.1),
    );

    // Issue 47, item 17: what the daemon refuses is the caller's 4xx naming what was refused,
    // never the node's 502: a file under /proc/sys, a snapshot name taken, a snapshot that does
    // not exist, a limit no kernel takes (an admin's).
    let refused_4xx = |answer: &(u16, String), field: &str| {
        (400..500).contains(&answer.0)
            && error(&answer.1).is_some_and(|e| e.error.field.as_deref() == Some(field))
    };
    let proc_push = cluster
        .request(
            M::PUT,
            "/instances/io-alice/files?path=/proc/sys/kernel/hostname",
            &alice,
        )
        .body("x")
        .send()
        .await
        .unwrap();
    let proc_push = (
        proc_push.status().as_u16(),
        proc_push.text().await.unwrap_or_default(),
    );
    found.check(refused_4xx(&proc_push, "path"), || {
        format!(
            "a push under /proc/sys: {} {:.300}",
            proc_push.0, proc_push.1
        )
    });
    let snap = |name: &'static str| {
        let cluster = &cluster;
        let alice = alice.clone();
        async move {
            raw(
                cluster,
                &alice,
                M::POST,
                "/instances/io-alice/snapshots",
                Some(to_json(&bodies::snapshot(name))),
            )
            .await
        }
    };
    let first_snap = snap("s1").await;
    found.check((200..300).contains(&first_snap.0), || {
        format!("a first snapshot: {} {:.300}", first_snap.0, first_snap.1)
    });
    let again = snap("s1").await;
    found.check(refused_4xx(&again, "name"), || {
        format!("a snapshot name taken: {} {:.300}", again.0, again.1)
    });
    let missing = raw(
        &cluster,
        &alice,
        M::POST,
        "/instances/io-alice/snapshots/nope/restore",
        None,
    )
    .await;
    found.check(refused_4xx(&missing, "snapshot"), || {
        format!(
            "restoring a missing snapshot: {} {:.300}",
            missing.0, missing.1
        )
    });
    let absurd = raw(
        &cluster,
        &cluster.admin_token,
        M::PATCH,
        "/instances/io-alice",
        Some(json!({"config": {"limits.processes": "99999999999999999999"}})),
    )
    .await;
    found.check((400..500).contains(&absurd.0), || {
        format!("an absurd limits.processes: {} {:.300}", absurd.0, absurd.1)
    });

    // An exec in a stopped instance is a conflict the caller can mend, not a failing node.
    let stop: Operation = cluster
        .call(
            &alice,
            M::PUT,
            "/instances/io-alice/state",
            Some(to_json(&InstanceStateChange {
                force: true,
                ..state_change(StateAction::Stop)
            })),
        )
        .await;
    cluster.succeeds(&alice, &stop).await;
    let stopped = exec(to_json(&bodies::exec(&["true"]))).await;
    found.check(stopped.0 == 409, || {
        format!("exec when stopped: {} {:.200}", stopped.0, stopped.1)
    });

    assert!(
        found.0.is_empty(),
        "{} checks failed:\n{}",
        found.0.len(),
        found.0.join("\n")
    );
}
