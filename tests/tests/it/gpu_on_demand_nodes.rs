//! Issue 43, GPUs on demand on real nodes: a controller process (killed -9 and started again),
//! an LXD node and an Incus node, PostgreSQL, and the `cohort` binary. The course turns
//! on-demand with `cohort course set`; its containers are then made and run without a GPU on
//! nodes that have none (a pinned GPU course would leave them queued); a student's request for
//! a GPU queues there and says its place and why, and the queue survives the controller's
//! restart (its why says no GPU is given where the NVIDIA runtime is missing, as on these
//! nodes); bad hours and another student's container are refused, with nothing queued; the
//! student leaves the queue with `cohort gpu detach`. (Attaching the GPU itself is tested with
//! the node faked at its seam, in the serial `gpu_on_demand`: no GPU exists on this machine.)

use std::time::{Duration, Instant};

use cohort_e2e::bodies::{course, CreateCourse};
use cohort_e2e::browser::{set_portal_password, Browser};
use cohort_e2e::cluster::Cluster;
use cohort_e2e::lxd::TestDaemon;
use cohort_e2e::{PortRange, TestLxd};
use reqwest::Method;
use serde_json::{json, Value};

use crate::cli_support::Cli;

fn cli_as(cluster: &Cluster, token: &str) -> Cli {
    Cli::of_cluster(cluster, token)
}

fn stderr_of(cli: &Cli, args: &[&str]) -> String {
    let out = cli.run(args);
    assert!(!out.status.success(), "{args:?} should fail: {out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_demand_containers_run_without_a_gpu_and_a_queued_request_survives_a_restart() {
    let started = Instant::now();
    let mut cluster = Cluster::start(0).await;
    cluster
        .add_node_in("odn-lxd", TestLxd::on(TestDaemon::Lxd))
        .await;
    cluster
        .add_node_in("odn-incus", TestLxd::on(TestDaemon::Incus))
        .await;
    cluster.import_gpu_ready_base_image("cohort/base").await;
    let prof = cluster.user("prof-odn", "instructor").await;
    cluster
        .create_course(
            &prof,
            CreateCourse {
                cpu: Some(1),
                memory_mib: Some(256),
                disk_gib: Some(2),
                gpus: Some(1),
                ..course("odn", "On demand", "cohort/base")
            },
        )
        .await;
    let staff = cli_as(&cluster, &prof);
    let bad = stderr_of(
        &staff,
        &["course", "set", "lab:odn", "--gpu-mode", "sometimes"],
    );
    assert!(bad.contains("gpu_mode"), "{bad}");
    staff.ok(&[
        "course",
        "set",
        "lab:odn",
        "--gpu-mode",
        "on-demand",
        "--gpu-lease-max-hours",
        "3",
    ]);
    let shown = staff.ok(&["course", "show", "lab:odn"]);
    assert!(
        shown.contains("gpu_mode: on-demand") && shown.contains("gpu_lease_max_hours: 3"),
        "{shown}"
    );

    // Alice on the Incus node, Bob on the LXD node; neither node has a GPU.
    for (student, on, away) in [
        ("alice-odn", "odn-incus", "odn-lxd"),
        ("bob-odn", "odn-lxd", "odn-incus"),
    ] {
        cluster
            .admin(Method::POST, &format!("/nodes/{away}/cordon"), None)
            .await;
        let restored = cluster
            .admin(Method::POST, &format!("/nodes/{on}/restore"), None)
            .await;
        if let Some(id) = restored["id"].as_str() {
            cluster.wait_operation(id, Duration::from_secs(60)).await;
        }
        let roster = format!("username,name,email,ssh_key\n{student},{student},,\n");
        cluster.import_roster(&prof, "odn", roster).await;
        let op = cluster.provision("odn", &prof).await;
        assert_eq!(op["status"], "success", "made without a GPU: {op}");
    }
    for (name, node) in [("odn-alice-odn", "odn-incus"), ("odn-bob-odn", "odn-lxd")] {
        let seen = cluster
            .admin(Method::GET, &format!("/instances/{name}"), None)
            .await;
        assert_eq!(
            (&seen["observed_state"], &seen["node"]),
            (&json!("running"), &json!(node)),
            "{seen}"
        );
        let lxd = &cluster
            .nodes
            .iter()
            .find(|n| n.name == node)
            .expect("node")
            .lxd;
        let devices = lxd.lxc(&["config", "device", "list", name]);
        assert!(!devices.contains("cohort-gpu"), "{name}: {devices}");
    }

    let alice = cli_as(&cluster, &cluster.token_for("alice-odn").await);
    let bob = cli_as(&cluster, &cluster.token_for("bob-odn").await);
    // Bad input: an `Error:` naming the field, 403 for another's container; nothing queued.
    for hours in ["-1", "0", "abc", "5"] {
        let err = stderr_of(
            &alice,
            &["gpu", "attach", "lab:odn-alice-odn", "--hours", hours],
        );
        assert!(
            err.contains("Error") && err.contains("hours"),
            "{hours}: {err}"
        );
    }
    let err = stderr_of(&bob, &["gpu", "attach", "lab:odn-alice-odn"]);
    assert!(err.contains("not yours"), "{err}");
    // Attach a GPU again is for pinned courses: here it says to ask for a lease.
    let err = stderr_of(&alice, &["gpu", "reattach", "lab:odn-alice-odn"]);
    assert!(
        err.contains("Error") && err.contains("ask for a lease"),
        "{err}"
    );
    let open = cluster.admin(Method::GET, "/gpu-leases", None).await;
    assert_eq!(open, json!([]), "nothing half-made");

    // Queued on a node without a GPU, with the place and why.
    let said = alice.ok(&["gpu", "attach", "lab:odn-alice-odn", "--hours", "1"]);
    assert!(said.contains("queued, place 1 on odn-incus"), "{said}");
    let said = bob.ok(&["gpu", "attach", "lab:odn-bob-odn"]);
    assert!(said.contains("queued, place 1 on odn-lxd"), "{said}");
    let queue = staff.ok(&["gpu", "queue", "lab:", "--format", "csv"]);
    assert!(
        queue.contains("odn-alice-odn") && queue.contains("odn-bob-odn"),
        "{queue}"
    );

    // kill -9 and a new controller process: the request is still there, still first.
    cluster.restart_controller();
    let deadline = Instant::now() + Duration::from_secs(60);
    let lease: Value = loop {
        let res = cluster
            .request(
                Method::GET,
                "/instances/odn-alice-odn/gpu-lease",
                &cluster.admin_token,
            )
            .send()
            .await;
        if let Ok(res) = res {
            if res.status().is_success() {
                break res.json().await.expect("lease");
            }
        }
        assert!(Instant::now() < deadline, "{}", cluster.controller_log());
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(
        (&lease["state"], &lease["place"], &lease["hours"]),
        (&json!("queued"), &json!(1), &json!(1.0)),
        "{lease}"
    );
    assert!(
        lease["why"]
            .as_str()
            .is_some_and(|why| why.contains("first in line")
                && why.contains("node odn-incus has no NVIDIA container runtime")),
        "{lease}"
    );

    let said = alice.ok(&["gpu", "detach", "lab:odn-alice-odn"]);
    assert!(said.contains("cancelled"), "{said}");
    let open = cluster.admin(Method::GET, "/gpu-leases", None).await;
    let left: Vec<&str> = open
        .as_array()
        .expect("leases")
        .iter()
        .filter_map(|l| l["instance"].as_str())
        .collect();
    assert_eq!(left, ["odn-bob-odn"], "{open}");

    // The portal: Alice's container page asks for a GPU in one click, shows her place, and
    // leaves the queue in another.
    let base = cluster.controller.url();
    set_portal_password(
        &cluster.db_url,
        &cluster.controller_dir(),
        "alice-odn",
        "on demand 4 all",
    );
    let ports = PortRange::claim();
    let browser = Browser::start(ports.port(0), "en").await;
    browser.sign_in(&base, "alice-odn", "on demand 4 all").await;
    browser
        .goto(&format!("{base}/containers/odn-alice-odn"))
        .await;
    browser.type_into("#lease-hours", "1.5").await;
    browser.click("#attach-gpu").await;
    browser
        .click_when_ready("#leave-gpu-queue", Duration::from_secs(30))
        .await;
    browser
        .click_when_ready("#attach-gpu", Duration::from_secs(30))
        .await;
    let audit = cluster
        .admin(
            Method::GET,
            "/audit?actor=alice-odn&object=odn-alice-odn",
            None,
        )
        .await;
    let actions: Vec<(&str, Option<f64>)> = audit["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap_or(""),
                e["detail"]["hours"].as_f64(),
            )
        })
        .collect();
    assert!(actions.contains(&("request_gpu", Some(1.5))), "{audit}");
    assert_eq!(
        actions.iter().filter(|(a, _)| *a == "release_gpu").count(),
        2,
        "the CLI's and the portal's: {audit}"
    );
    let ended = browser.text("#gpu-queued").await;
    assert!(ended.contains("Place in the queue: 1"), "{ended}");
    eprintln!("took {:?}", started.elapsed());
}
