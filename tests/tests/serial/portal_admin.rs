//! Issue 27's admin pages in a real browser (headless Chromium over WebDriver) against a real
//! controller and a real agent whose GPUs come from the test NVML library: the nodes with their
//! GPUs, cordon, evacuate (after its confirmation) and restore through the page as the API then
//! reports them, the queue with a waiting container's reason, a user's role changed (and one's
//! own refused at its field), the page refused to a student and an instructor, forms without the CSRF token refused.

use std::time::{Duration, Instant};

use cohort_e2e::bodies::{instance, limits, CreateInstance};
use cohort_e2e::browser::{set_portal_password, Browser};
use cohort_e2e::cluster::Cluster;
use cohort_e2e::observe::build_fake_nvml;
use cohort_e2e::PortRange;
use cohort_proto::api::users::{Role, SetRole};
use reqwest::Method;
use serde_json::{json, Value};

fn set_password(cluster: &Cluster, username: &str, password: &str) {
    let state = cluster.state.path().join("controller");
    set_portal_password(&cluster.db_url, &state, username, password);
}

async fn node_state(cluster: &Cluster) -> String {
    let node = cluster.admin(Method::GET, "/nodes/node1", None).await;
    node["state"].as_str().expect("state").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_admin_sees_gpus_cordons_evacuates_restores_and_sets_roles() {
    let _alone = crate::alone().await;
    let dir = tempfile::tempdir().expect("dir");
    // The agent process inherits these: its GPUs are the test NVML library's.
    let procs = dir.path().join("processes");
    std::fs::write(&procs, "").expect("processes file");
    std::env::set_var("FAKE_NVML_PROCESSES", &procs);
    std::env::set_var("COHORT_AGENT_NVML_LIBRARY", build_fake_nvml(dir.path()));
    let cluster = Cluster::start(1).await;
    cluster.import_base_image("cohort/base").await;
    let ann = cluster.user("ann", "student").await;
    cluster.user("lin", "student").await;
    cluster.user("prof", "instructor").await;
    set_password(&cluster, "admin", "the admin's password");
    set_password(&cluster, "lin", "lin's long password");
    set_password(&cluster, "prof", "prof's long password");
    let started = Instant::now();
    let gpus = loop {
        let gpus = cluster.admin(Method::GET, "/gpus", None).await;
        if gpus.as_array().is_some_and(|g| !g.is_empty()) {
            break gpus;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "no GPUs seen");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let gpus = gpus.as_array().expect("gpus").clone();
    let base = cluster.controller.url();
    let ports = PortRange::claim();
    let browser = Browser::start(ports.port(1), "en").await;

    // A student and an instructor are refused the page (and its evacuation page).
    for (who, password) in [
        ("lin", "lin's long password"),
        ("prof", "prof's long password"),
    ] {
        browser.sign_in(&base, who, password).await;
        for page in ["/admin", "/admin/nodes/node1/evacuate"] {
            browser.goto(&format!("{base}{page}")).await;
            assert_eq!(
                browser.text("main .error").await,
                "You may not see this page.",
                "{who} {page}"
            );
        }
        browser.goto(&format!("{base}/")).await;
        if who == "lin" {
            // The create form offers GPUs within a student's allowance (1), a model to choose
            // where the fleet has several, and a GPU asked for on an image not marked
            // GPU-ready is refused at the image, nothing made.
            let most = browser
                .run("return document.getElementById('new-gpus').max")
                .await;
            assert_eq!(most, "1", "the GPU field's limit");
            let mut models: Vec<&str> = gpus
                .iter()
                .map(|g| g["model"].as_str().expect("model"))
                .collect();
            models.sort();
            models.dedup();
            let offered = if models.len() > 1 {
                browser.count("#new-gpu-model option").await - 1
            } else {
                models.len()
            };
            assert_eq!(offered, models.len(), "one choice a model: {models:?}");
            for (field, value) in [
                ("#new-name", "lin-gpu"),
                ("#new-memory_mib", "256"),
                ("#new-disk_gib", "2"),
                ("#new-gpus", "1"),
            ] {
                browser.type_into(field, value).await;
            }
            browser.follow("#create-container-button").await;
            let refused = browser.text("#image-error").await;
            assert!(refused.contains("GPU-ready"), "{refused}");
            let all = cluster.admin(Method::GET, "/instances", None).await;
            assert_eq!(all.as_array().map(Vec::len), Some(0), "{all}");
        }
        browser.follow(".signout button").await;
    }

    // The admin: node1 and every GPU the API lists, with its model.
    browser
        .sign_in(&base, "admin", "the admin's password")
        .await;
    browser.follow("#admin-link").await;
    assert_eq!(browser.text("tr[data-node=node1] td.state").await, "online");
    assert_eq!(browser.count("#gpus tbody tr").await, gpus.len());
    for gpu in &gpus {
        let uuid = gpu["uuid"].as_str().expect("uuid");
        let row = format!("#gpus tr[data-gpu='{uuid}']");
        assert_eq!(
            browser.text(&format!("{row} td.model")).await,
            gpu["model"].as_str().expect("model")
        );
        assert_eq!(
            browser.text(&format!("{row} td.allocated")).await,
            format!("0 / {}", gpu["share_limit"])
        );
    }
    browser.screenshot("admin-fleet-en").await;

    // Forms without the CSRF token are refused and change nothing.
    for path in [
        "/admin/nodes/node1/cordon",
        "/admin/nodes/node1/evacuate",
        "/admin/users/lin/role",
    ] {
        assert_eq!(browser.post_from_page(path, "role=admin").await, 403);
    }
    assert_eq!(node_state(&cluster).await, "online");

    // Cordon through the page: the API says cordoned, and a new container waits in the queue
    // with the reason the API gives it.
    browser
        .follow("tr[data-node=node1] button[data-action=cordon]")
        .await;
    assert_eq!(node_state(&cluster).await, "cordoned");
    assert_eq!(
        browser.text("tr[data-node=node1] td.state").await,
        "cordoned"
    );
    let res = cluster
        .request(Method::POST, "/instances", &ann)
        .json(&CreateInstance {
            limits: Some(limits(1, 256, 2)),
            ..instance("ann-q1", "cohort/base")
        })
        .send()
        .await
        .expect("create");
    assert!(res.status().is_success(), "{}", res.status());
    let queued = cluster.admin(Method::GET, "/instances/ann-q1", None).await;
    assert_eq!(queued["observed_state"], "queued");
    let reason = queued["error"].as_str().expect("a reason").to_string();
    assert!(reason.starts_with("queued:"), "{reason}");
    browser.goto(&format!("{base}/admin")).await;
    assert_eq!(
        browser.text("#queue tr[data-name=ann-q1] td.reason").await,
        reason
    );

    // Evacuate asks first, saying what it does; then the node is evacuating.
    browser
        .follow("tr[data-node=node1] a[data-action=evacuate]")
        .await;
    assert!(browser
        .text("#evacuate-warning")
        .await
        .contains("stops its containers"));
    browser.follow("#evacuate").await;
    assert_eq!(node_state(&cluster).await, "evacuating");
    // The queued container goes before the node is restored, so nothing is created on it.
    cluster
        .admin(Method::DELETE, "/instances/ann-q1?force=true", None)
        .await;
    browser
        .follow("tr[data-node=node1] button[data-action=restore]")
        .await;
    assert_eq!(node_state(&cluster).await, "online");

    // Roles: lin becomes an instructor (the API agrees, the audit log has it); the admin's own
    // role change is refused next to its field.
    browser
        .run("document.getElementById('role-lin').value = 'instructor'; return 1;")
        .await;
    browser
        .follow("tr[data-user=lin] button[data-action=set-role]")
        .await;
    let users = cluster.admin(Method::GET, "/users", None).await;
    let lin = users
        .as_array()
        .expect("users")
        .iter()
        .find(|u| u["username"] == "lin")
        .expect("lin");
    assert_eq!(lin["role"], "instructor");
    assert_eq!(
        browser.text("tr[data-user=lin] td.role").await,
        "Instructor"
    );
    let audit: Value = cluster
        .admin(Method::GET, "/audit?action=set_role&actor=admin", None)
        .await;
    assert_eq!(audit["entries"][0]["object"], "lin");
    browser
        .run("document.getElementById('role-admin').value = 'student'; return 1;")
        .await;
    browser
        .follow("tr[data-user=admin] button[data-action=set-role]")
        .await;
    assert_eq!(
        browser.text("#role-admin-error").await,
        "an admin cannot change their own role"
    );
    // The REST API's door to the same action: a student is refused, a bad role is named.
    let res = cluster
        .request(Method::PUT, "/users/lin/role", &ann)
        .json(&SetRole { role: Role::Admin })
        .send()
        .await
        .expect("put role");
    assert_eq!(res.status(), 403);
    let res = cluster
        .request(Method::PUT, "/users/lin/role", &cluster.admin_token)
        .json(&json!({"role": "root"}))
        .send()
        .await
        .expect("put role");
    assert_eq!(res.status(), 400);
    let res = cluster
        .request(Method::PUT, "/users/prof/role", &cluster.admin_token)
        .json(&SetRole {
            role: Role::Student,
        })
        .send()
        .await
        .expect("put role");
    assert_eq!(res.status(), 200);
    assert_eq!(res.json::<Value>().await.expect("user")["role"], "student");
    browser.screenshot("admin-users-en").await;
}
