//! Issue 9, the agent: GPU compute processes (from the test NVML library, naming the host PIDs
//! of real processes) are attributed to the real LXD container that holds them, in the agent's
//! inventory and its Prometheus metrics, which `promtool check metrics` accepts.

use cohort_e2e::agent::TestAgent;
use cohort_e2e::observe::{build_fake_nvml, promtool_check, sample, start_sleep_in};
use cohort_e2e::TestLxd;
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gpu_processes_are_attributed_to_their_containers() {
    let _alone = crate::alone().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let lib = build_fake_nvml(dir.path());
    let procs = dir.path().join("processes");
    std::env::set_var("FAKE_NVML_PROCESSES", &procs);
    let lxd = TestLxd::new();
    lxd.lxc_create(&["launch", "cohort/base", "busy"]);
    lxd.lxc_create(&["launch", "cohort/base", "quiet"]);
    let busy_pid = start_sleep_in(lxd.project(), "busy");
    let host_pid = std::process::id();
    // GPU 1 (the L40S): 2 GiB from the busy container, 4 KiB from a host process.
    std::fs::write(
        &procs,
        format!("1 {busy_pid} 2147483648\n1 {host_pid} 4096\n"),
    )
    .expect("write processes");

    let agent = TestAgent::start_with(&lxd, |c| c.nvml_library = Some(lib.clone())).await;
    let client = agent.controller();

    let inv: Value = client
        .get(agent.url("/v1/inventory"))
        .send()
        .await
        .expect("inventory")
        .json()
        .await
        .expect("inventory json");
    let l40s = inv["gpus"]["gpus"]
        .as_array()
        .expect("gpus")
        .iter()
        .find(|g| g["index"] == 1)
        .expect("GPU 1");
    let processes = l40s["processes"].as_array().expect("processes");
    assert_eq!(processes.len(), 2, "{l40s}");
    let of = |pid: u32| {
        processes
            .iter()
            .find(|p| p["pid"] == pid)
            .unwrap_or_else(|| panic!("pid {pid} in {l40s}"))
    };
    assert_eq!(of(busy_pid)["instance"], "busy");
    assert_eq!(of(busy_pid)["used_memory_bytes"], 2147483648u64);
    assert_eq!(of(host_pid)["instance"], Value::Null);
    assert_eq!(l40s["temperature_celsius"], 35);
    assert_eq!(l40s["power_milliwatts"], 80000);

    let res = client
        .get(agent.url("/v1/metrics"))
        .send()
        .await
        .expect("metrics");
    assert_eq!(res.status(), 200);
    let text = res.text().await.expect("metrics text");
    promtool_check("the agent's /v1/metrics", &text);
    let l40s_uuid = l40s["uuid"].as_str().expect("uuid");
    let busy = [("container", "busy"), ("gpu", l40s_uuid)];
    assert_eq!(
        sample(&text, "cohort_agent_container_gpu_memory_used_bytes", &busy),
        Some(2147483648.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "cohort_agent_container_gpu_processes", &busy),
        Some(1.0)
    );
    let share = sample(&text, "cohort_agent_container_gpu_memory_share", &busy).expect("share");
    assert!((share - 2.0 / 48.0).abs() < 1e-9, "share {share}");
    assert_eq!(
        sample(
            &text,
            "cohort_agent_container_gpu_processes",
            &[("container", "quiet")]
        ),
        None,
        "the quiet container holds no GPU: {text}"
    );
    assert_eq!(
        sample(
            &text,
            "cohort_agent_gpu_temperature_celsius",
            &[("gpu", l40s_uuid)]
        ),
        Some(35.0)
    );
    assert_eq!(
        sample(&text, "cohort_agent_gpu_power_watts", &[("gpu", l40s_uuid)]),
        Some(80.0)
    );
    assert_eq!(
        sample(
            &text,
            "cohort_agent_gpu_memory_total_bytes",
            &[("gpu", l40s_uuid)]
        ),
        Some(48.0 * 1024.0 * 1024.0 * 1024.0)
    );
    let mem = sample(
        &text,
        "cohort_agent_container_memory_bytes",
        &[("container", "busy")],
    )
    .expect("container memory");
    assert!(mem > 0.0, "{text}");
    assert!(sample(
        &text,
        "cohort_agent_container_cpu_seconds",
        &[("container", "busy")]
    )
    .is_some_and(|v| v > 0.0));

    // The optional plain listener answers the same on loopback, and only /metrics.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let plain = tokio::spawn(cohort_agent::api::serve_metrics(
        listener,
        agent.node.clone(),
    ));
    let body = reqwest::get(format!("http://{addr}/metrics"))
        .await
        .expect("plain metrics")
        .text()
        .await
        .expect("text");
    promtool_check("the agent's plain /metrics", &body);
    assert!(body.contains("cohort_agent_container_gpu_processes{container=\"busy\""));
    let other = reqwest::get(format!("http://{addr}/v1/inventory"))
        .await
        .expect("answer");
    assert_eq!(other.status(), 404);
    plain.abort();
}

/// The reclaimer's `detach` on the node. No GPU exists here and LXD cannot start a container
/// with a `gpu` device, so two real containers show the two halves: a running one whose
/// `cohort-gpu*` devices are harmless `none` devices standing in for GPUs (hot removal while it
/// keeps running), and a stopped one holding a real `gpu`-type device in its LXD config.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detach_gpus_removes_only_cohort_gpu_devices() {
    let _alone = crate::alone().await;
    let lxd = TestLxd::new();
    lxd.lxc_create(&["launch", "cohort/base", "held"]);
    for dev in ["cohort-gpu0", "cohort-gpu1", "cohort-keep", "scratch"] {
        lxd.lxc(&["config", "device", "add", "held", dev, "none"]);
    }
    lxd.lxc_create(&["launch", "cohort/base", "parked"]);
    lxd.lxc(&["stop", "parked", "--force"]);
    lxd.lxc(&[
        "config",
        "device",
        "add",
        "parked",
        "cohort-gpu0",
        "gpu",
        "id=0",
    ]);
    let agent = TestAgent::start(&lxd).await;
    let client = agent.controller();
    let devices = |name: &str| -> Vec<String> {
        let mut names: Vec<String> = lxd
            .lxc(&["config", "device", "list", name])
            .lines()
            .map(str::to_string)
            .collect();
        names.sort();
        names
    };

    // The public PATCH refuses Cohort's own devices, GPU ones included.
    let res = client
        .patch(agent.url("/v1/instances/held"))
        .json(&serde_json::json!({"remove_devices": ["cohort-gpu0"]}))
        .send()
        .await
        .expect("patch");
    assert_eq!(res.status(), 409);
    assert!(devices("held").contains(&"cohort-gpu0".to_string()));
    // Only a certificate with the controller role reaches the agent at all.
    let node_leaf = agent.ca.leaf("node-x", cohort_proto::ROLE_NODE, false);
    assert!(agent
        .client_with(Some(&node_leaf))
        .post(agent.url("/v1/instances/held/gpus/detach"))
        .send()
        .await
        .is_err());
    assert!(devices("held").contains(&"cohort-gpu0".to_string()));

    // Running: both GPU devices go, every other device stays, and it keeps running.
    let res = client
        .post(agent.url("/v1/instances/held/gpus/detach"))
        .send()
        .await
        .expect("detach");
    assert_eq!(res.status(), 200);
    let view: Value = res.json().await.expect("instance");
    assert_eq!(view["status"], "Running", "{view}");
    assert_eq!(devices("held"), ["cohort-keep", "scratch"]);
    assert_eq!(
        lxd.lxc(&["list", "held", "-c", "s", "-f", "csv"]),
        "RUNNING\n"
    );

    // Stopped, with a real `gpu` device in its config: gone from LXD's config.
    assert!(lxd.lxc(&["config", "show", "parked"]).contains("type: gpu"));
    for _ in 0..2 {
        // Twice: with nothing left to remove it is still success (a retried step).
        let res = client
            .post(agent.url("/v1/instances/parked/gpus/detach"))
            .send()
            .await
            .expect("detach");
        assert_eq!(res.status(), 200);
    }
    let shown = lxd.lxc(&["config", "show", "parked"]);
    assert!(
        !shown.contains("type: gpu") && !shown.contains("cohort-gpu"),
        "{shown}"
    );
    let res = client
        .post(agent.url("/v1/instances/nope/gpus/detach"))
        .send()
        .await
        .expect("detach");
    assert_eq!(res.status(), 404);
}
