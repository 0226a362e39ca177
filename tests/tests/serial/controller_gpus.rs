//! Issue 24, GPUs as LXD takes them and as courses share them, against the real database with
//! the controller's real poller, placement, queue, worker and reclaimer; the node's agent is
//! faked at its trait seam ([`GpuNode`]) and reports the GPUs of the test NVML library, since
//! no GPU exists here.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::{test, web, App};
use cohort_controller::db::models::operation::Operation;
use cohort_controller::http::api;
use cohort_controller::instances::manage as instances;
use cohort_controller::{app::poller, jobs::worker};
use cohort_e2e::bodies::{state_change, to_json, StateAction};
use cohort_e2e::controller::TestController;
use cohort_e2e::gpu_node::GpuNode;
use cohort_e2e::observe::build_fake_nvml;
use cohort_proto::agent::{CreateInstance, Gpu};
use cohort_proto::api::gpus::UpdateGpu;
use cohort_proto::api::instances::{CreateInstance as ApiCreate, GpuShare, PlacementStrategy};
use cohort_proto::api::operations::OperationStatus;
use cohort_proto::api::users::CreateApiToken;
use serde_json::{json, Value};

fn request(name: &str, gpus: u32) -> ApiCreate {
    ApiCreate {
        name: name.into(),
        image: "base".into(),
        limits: None,
        gpus,
        gpu_model: None,
        gpu_share: GpuShare::Shared,
        config: BTreeMap::new(),
        owner: None,
        node: None,
        strategy: PlacementStrategy::Spread,
        priority: 0,
        queue: true,
        start: true,
    }
}

/// Waits until every operation is final.
async fn all_final(t: &TestController, within: Duration) -> Vec<Operation> {
    let deadline = Instant::now() + within;
    loop {
        let ops = Operation::list(&mut t.conn(), None).unwrap();
        if ops
            .iter()
            .all(|o| o.status != OperationStatus::Pending && o.status != OperationStatus::Running)
        {
            return ops;
        }
        assert!(Instant::now() < deadline, "operations unfinished: {ops:#?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The GPU cards a `gpu` device of LXD 5.0.2 selects (lxd/device/gpu.go's `gpuSelected`: a card
/// is selected unless a `vendorid`, `pci`, `productid` or `id` key is set and differs), after
/// the device's own checks (lxd/device/gpu_mig.go's `validateConfig`: `pci` excludes `id`,
/// `productid` and `vendorid`; `mig.uuid` excludes `mig.gi` and `mig.ci`, and without it both
/// are needed). A MIG device starts only when exactly one card is selected ("More than one GPU
/// matched the MIG device" otherwise).
fn lxd_selected_cards<'a>(dev: &BTreeMap<String, String>, cards: &'a [Gpu]) -> Vec<&'a Gpu> {
    let key = |k: &str| dev.get(k).map(String::as_str).unwrap_or("");
    if !key("pci").is_empty() {
        for k in ["id", "productid", "vendorid"] {
            assert!(key(k).is_empty(), "LXD refuses {k:?} with pci: {dev:?}");
        }
    }
    if key("mig.uuid").is_empty() {
        assert!(
            !key("mig.gi").is_empty() && !key("mig.ci").is_empty(),
            "LXD needs mig.uuid or both mig.gi and mig.ci: {dev:?}"
        );
    } else {
        for k in ["mig.gi", "mig.ci"] {
            assert!(
                key(k).is_empty(),
                "LXD refuses {k:?} with mig.uuid: {dev:?}"
            );
        }
    }
    // The test NVML library reports no vendor, product or DRM id a device could name.
    for k in ["vendorid", "productid", "id"] {
        assert!(key(k).is_empty(), "unexpected {k:?}: {dev:?}");
    }
    cards
        .iter()
        .filter(|c| key("pci").is_empty() || c.pci_address == key("pci"))
        .collect()
}

/// Issue 24: on a node of two GPUs in MIG mode, every MIG instance the controller hands out
/// reaches LXD as a `gputype=mig` device that selects exactly its parent card.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mig_devices_on_a_node_of_two_gpus_select_their_parent_card() {
    let _alone = crate::alone().await;
    let dir = tempfile::tempdir().unwrap();
    let lib = build_fake_nvml(dir.path());
    let node = GpuNode::new(&lib, true);
    let cards = node.gpus.gpus.clone();
    assert!(
        cards.len() == 2 && cards.iter().all(|c| c.mig_enabled),
        "two GPUs in MIG mode: {cards:#?}"
    );
    let parent_of: BTreeMap<String, String> = cards
        .iter()
        .flat_map(|c| {
            c.mig_devices
                .iter()
                .map(|m| (m.uuid.clone(), c.pci_address.clone()))
        })
        .collect();
    assert_eq!(parent_of.len(), 3, "{parent_of:?}");

    let t = TestController::with_agents(Arc::new(node.clone()));
    let (admin, _) = t.user("admin", "admin");
    t.image("base");
    t.node("mig-node", (26000, 26009), 64, 256, true);
    poller::poll_all(&t.ctl).await;
    tokio::spawn(worker::run(t.ctl.clone()));
    for name in ["mig-a", "mig-b", "mig-c"] {
        instances::create(&t.ctl, admin.clone(), request(name, 1))
            .await
            .unwrap();
    }
    let ops = all_final(&t, Duration::from_secs(60)).await;
    assert!(
        ops.iter().all(|o| o.status == OperationStatus::Success),
        "{ops:#?}"
    );

    let creates: Vec<CreateInstance> = node.calls().creates.clone();
    assert_eq!(creates.len(), 3);
    let mut handed_out = BTreeSet::new();
    for req in &creates {
        let plan = cohort_agent::instances::spec::plan(req, "default")
            .unwrap_or_else(|e| panic!("the agent refuses {}: {e}", req.name));
        let devices: BTreeMap<String, BTreeMap<String, String>> = plan.body.devices.clone();
        let gpus: Vec<_> = devices
            .iter()
            .filter(|(_, d)| d.get("type").map(String::as_str) == Some("gpu"))
            .collect();
        assert_eq!(gpus.len(), 1, "{}: {devices:?}", req.name);
        let (_, dev) = gpus[0];
        assert_eq!(dev["gputype"], "mig", "{dev:?}");
        let uuid = dev["mig.uuid"].clone();
        let selected = lxd_selected_cards(dev, &cards);
        assert_eq!(
            selected.len(),
            1,
            "{}: LXD would find {} cards for {dev:?}",
            req.name,
            selected.len()
        );
        assert_eq!(
            Some(&selected[0].pci_address),
            parent_of.get(&uuid),
            "{}: the card LXD picks is not {uuid}'s parent",
            req.name
        );
        handed_out.insert(uuid);
    }
    assert_eq!(handed_out.len(), 3, "every MIG instance, each once");
}

/// `method path` through the API's real handlers as `token`; (status, JSON body or Null).
macro_rules! call {
    ($app:expr, $token:expr, $method:expr, $path:expr, $body:expr) => {{
        let req = test::TestRequest::default()
            .method($method.parse().unwrap())
            .uri(&format!("/api/v1{}", $path))
            .insert_header(("authorization", format!("Bearer {}", $token)));
        let req = match $body {
            Body::None => req,
            Body::Json(v) => req.set_json(v),
            Body::Csv(text) => req
                .insert_header(("content-type", "text/csv"))
                .set_payload(text),
        };
        let res = test::call_service($app, req.to_request()).await;
        let status = res.status().as_u16();
        let bytes = test::read_body(res).await;
        (
            status,
            serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null),
        )
    }};
}

enum Body {
    None,
    Json(Value),
    Csv(String),
}

/// Instance name -> the GPU uuids it holds, and the names still queued.
fn gpu_holders(t: &TestController) -> (BTreeMap<String, Vec<String>>, BTreeSet<String>) {
    use cohort_controller::db::schema::{gpu_allocations, gpus, instances as inst};
    use diesel::prelude::*;
    let mut conn = t.conn();
    let mut held: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let rows: Vec<(String, String)> = gpu_allocations::table
        .inner_join(gpus::table.on(gpus::id.eq(gpu_allocations::gpu_id)))
        .inner_join(inst::table.on(inst::id.eq(gpu_allocations::instance_id)))
        .select((inst::name, gpus::uuid))
        .load(&mut conn)
        .unwrap();
    for (name, uuid) in rows {
        held.entry(name).or_default().push(uuid);
    }
    let queued: Vec<String> = inst::table
        .filter(inst::node_id.is_null())
        .select(inst::name)
        .load(&mut conn)
        .unwrap();
    (held, queued.into_iter().collect())
}

/// The GPU node of the test NVML library (an A100 in MIG mode and an L40S) with the L40S
/// shared by up to 4, an instructor and their course `code` of `students` asking for one L40S
/// at `gpu_share`, provisioned. Returns the controller, the node, the API's tokens
/// (admin, instructor) and the L40S's uuid.
async fn shared_l40s_course(
    code: &str,
    gpu_share: u32,
    students: &[&str],
    extra: Value,
) -> (TestController, GpuNode, String, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let lib = build_fake_nvml(dir.path());
    let node = GpuNode::new(&lib, false);
    let l40s = node.l40s();
    let t = TestController::with_agents(Arc::new(node.clone()));
    let (_, admin) = t.user("admin", "admin");
    let (_, prof) = t.user("prof", "instructor");
    t.image("base");
    t.node("gpu-node", (26100, 26119), 64, 256, true);
    poller::poll_all(&t.ctl).await;
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    let share = to_json(&UpdateGpu { share_limit: 4 });
    let (status, body) = call!(
        &app,
        &admin,
        "PATCH",
        &format!("/gpus/{l40s}"),
        Body::Json(share)
    );
    assert_eq!(status, 200, "{body}");
    let mut course = json!({"code": code, "title": "Shared GPUs", "image": "base", "gpus": 1,
                            "gpu_model": "NVIDIA L40S", "gpu_share": gpu_share});
    for (k, v) in extra.as_object().into_iter().flatten() {
        course[k] = v.clone();
    }
    let (status, body) = call!(&app, &prof, "POST", "/courses", Body::Json(course));
    assert_eq!(status, 201, "{body}");
    let mut roster = String::from("username,name,email,ssh_key\n");
    for s in students {
        roster.push_str(&format!("{s},{s},,\n"));
    }
    let path = format!("/courses/{code}/roster");
    let (status, body) = call!(&app, &prof, "POST", &path, Body::Csv(roster));
    assert_eq!(status, 200, "{body}");
    let path = format!("/courses/{code}/provision");
    let (status, body) = call!(&app, &prof, "POST", &path, Body::None);
    assert_eq!(status, 202, "{body}");
    (t, node, admin, prof, l40s)
}

/// Issue 24: a course's `--gpu-share 2` puts at most two of its students on one GPU, although
/// the GPU's own `share_limit` (4) would take more; the third waits in the queue.
#[actix_web::test]
async fn a_courses_gpu_share_caps_how_many_share_one_gpu() {
    let _alone = crate::alone().await;
    let (t, _node, _admin, prof, l40s) =
        shared_l40s_course("sh", 2, &["s1", "s2", "s3"], json!({})).await;
    let (held, queued) = gpu_holders(&t);
    let on_l40s: Vec<&String> = held
        .iter()
        .filter(|(_, g)| g.contains(&l40s))
        .map(|(n, _)| n)
        .collect();
    assert_eq!(on_l40s.len(), 2, "two students on the L40S: {held:?}");
    assert_eq!(queued.len(), 1, "the third waits: {held:?} {queued:?}");
    assert!(
        held.values().all(|g| g == std::slice::from_ref(&l40s)),
        "{held:?}"
    );

    // The course shows its share.
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    let (status, course) = call!(&app, &prof, "GET", "/courses/sh", Body::None);
    assert_eq!(status, 200, "{course}");
    assert_eq!(course["gpu_share"], "shared");
    assert_eq!(course["gpu_share_count"], 2);
}

/// Polls `probe` every 200 ms for at most a minute.
async fn until<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// (observed state, error) of an instance.
fn state_of(t: &TestController, name: &str) -> (String, Option<String>) {
    use cohort_controller::db::schema::instances as inst;
    use diesel::prelude::*;
    inst::table
        .filter(inst::name.eq(name))
        .select((inst::observed_state, inst::error))
        .first(&mut t.conn())
        .unwrap()
}

/// Issue 24: an idle stop gives the GPU slot back, so the student waiting in the queue gets
/// it; a start takes a slot again on the instance's node (its GPU device put back before the
/// start) or, with none free, waits with the reason shown, and starts once one frees.
#[actix_web::test]
async fn an_idle_stop_gives_the_gpu_back_and_a_start_takes_one_again_or_waits() {
    let _alone = crate::alone().await;
    // Two students share the L40S (gpu_share 2); the third waits for a slot.
    let (t, node, _admin, prof, l40s) = shared_l40s_course(
        "id",
        2,
        &["s1", "s2", "s3"],
        json!({"idle_gpu_minutes": 1, "warn_minutes": 0}),
    )
    .await;
    tokio::spawn(worker::run(t.ctl.clone()));
    let (held, queued) = gpu_holders(&t);
    assert_eq!(queued, BTreeSet::from(["id-s3".to_string()]), "{held:?}");
    until("s1 and s2 running", || {
        (state_of(&t, "id-s1").0 == "running" && state_of(&t, "id-s2").0 == "running").then_some(())
    })
    .await;

    // Both use no GPU for a reclaim "minute" of one second: stopped, and the slots given back.
    poller::poll_all(&t.ctl).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let reclaimer = t.another_configured("reclaimer", |c| c.reclaim.minute_s = 1);
    assert_eq!(
        cohort_controller::reclaim::pass(&reclaimer).await.unwrap(),
        2
    );
    until("the idle ones stopped and their slots free", || {
        let (held, _) = gpu_holders(&t);
        let stopped = ["id-s1", "id-s2"]
            .iter()
            .all(|n| state_of(&t, n).0 == "stopped" && !held.contains_key(*n));
        stopped.then_some(())
    })
    .await;
    let detached = node.calls().detached.clone();
    assert!(
        detached.contains(&"id-s1".into()) && detached.contains(&"id-s2".into()),
        "the devices come off before the slots go: {detached:?}"
    );

    // The queued student gets the GPU.
    cohort_controller::placement::queue::place_queued(&mut t.conn(), &t.ctl.config.placement)
        .unwrap();
    until("s3 placed and running", || {
        let (held, _) = gpu_holders(&t);
        (held.get("id-s3") == Some(&vec![l40s.clone()]) && state_of(&t, "id-s3").0 == "running")
            .then_some(())
    })
    .await;

    // s1 starts: it takes the other slot again, its device put back before the start.
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    let start = || Body::Json(to_json(&state_change(StateAction::Start)));
    let (status, body) = call!(&app, &prof, "PUT", "/instances/id-s1/state", start());
    assert_eq!(status, 202, "{body}");
    until("s1 running on the L40S again", || {
        let (held, _) = gpu_holders(&t);
        (held.get("id-s1") == Some(&vec![l40s.clone()]) && state_of(&t, "id-s1").0 == "running")
            .then_some(())
    })
    .await;
    {
        let calls = node.calls();
        let (name, gpus) = calls.attached.last().expect("devices put back");
        assert_eq!(name, "id-s1");
        assert_eq!(gpus.len(), 1);
        assert_eq!(gpus[0].uuid, l40s);
        assert_eq!(gpus[0].pci_address.as_deref(), Some("0000:af:00.0"));
        let s1: Vec<&str> = calls
            .events
            .iter()
            .filter_map(|e| e.strip_suffix(" id-s1"))
            .collect();
        assert_eq!(
            s1,
            ["stop", "detach", "attach", "start"],
            "stopped, devices off; devices back, started"
        );
    }

    // s2 starts: the L40S is full (s3 and s1), so it waits and says why.
    let (status, body) = call!(&app, &prof, "PUT", "/instances/id-s2/state", start());
    assert_eq!(status, 202, "{body}");
    let why = until("s2 waiting with a reason", || state_of(&t, "id-s2").1).await;
    assert!(
        why.starts_with("waiting for a GPU:")
            && why.contains("NVIDIA L40S")
            && why.contains("node gpu-node")
            && why.contains("at most 2"),
        "{why}"
    );
    let (status, shown) = call!(&app, &prof, "GET", "/instances/id-s2", Body::None);
    assert_eq!(status, 200);
    assert_eq!(shown["error"], why.as_str(), "{shown}");
    assert_eq!(shown["observed_state"], "stopped", "{shown}");
    poller::poll_all(&t.ctl).await;
    assert_eq!(
        state_of(&t, "id-s2").1.as_deref(),
        Some(why.as_str()),
        "a poll keeps the reason"
    );

    // s3 goes away: s2 takes its slot and starts; the reason is gone.
    let (status, body) = call!(
        &app,
        &prof,
        "DELETE",
        "/instances/id-s3?force=true",
        Body::None
    );
    assert_eq!(status, 202, "{body}");
    until("s2 running on the L40S", || {
        let (held, _) = gpu_holders(&t);
        (held.get("id-s2") == Some(&vec![l40s.clone()])
            && state_of(&t, "id-s2") == ("running".into(), None))
            .then_some(())
    })
    .await;
    let (held, _) = gpu_holders(&t);
    assert_eq!(held.len(), 2, "s1 and s2 share the L40S: {held:?}");
}

/// Issue 43: use unknown is not idleness, for a while. Of three idle containers, the one its node
/// answers about (nothing in use) is stopped at once; the one its node gives no answer about, and
/// the one whose JupyterLab took the connection but said nothing, are spared; once they have gone
/// unanswered for a whole idle window, the reclaimer decides on what it last heard and stops them.
#[actix_web::test]
async fn a_container_whose_use_goes_unanswered_is_spared_one_idle_window() {
    let _alone = crate::alone().await;
    let (t, node, _admin, _prof, _l40s) = shared_l40s_course(
        "un",
        3,
        &["s1", "s2", "s3"],
        json!({"idle_gpu_minutes": 2, "warn_minutes": 0, "idle_action": "stop"}),
    )
    .await;
    tokio::spawn(worker::run(t.ctl.clone()));
    until("all three running", || {
        ["un-s1", "un-s2", "un-s3"]
            .iter()
            .all(|n| state_of(&t, n).0 == "running")
            .then_some(())
    })
    .await;
    {
        let mut calls = node.calls();
        calls.activity.insert("un-s1".into(), None);
        let jupyter_silent = cohort_proto::activity::InstanceActivity {
            jupyter_unanswered: true,
            ..Default::default()
        };
        calls.activity.insert("un-s2".into(), Some(jupyter_silent));
    }
    // Idle for longer than the window (two reclaim minutes of one second) before the first pass.
    poller::poll_all(&t.ctl).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let reclaimer = t.another_configured("reclaimer", |c| c.reclaim.minute_s = 1);
    let mut memory = cohort_controller::reclaim::activity::Unanswered::default();
    assert_eq!(
        cohort_controller::reclaim::pass_remembering(&reclaimer, &mut memory)
            .await
            .unwrap(),
        1,
        "only the answered one"
    );
    let wanted = |name: &str| -> String {
        use cohort_controller::db::schema::instances as inst;
        use diesel::prelude::*;
        inst::table
            .filter(inst::name.eq(name))
            .select(inst::desired_state)
            .first(&mut t.conn())
            .unwrap()
    };
    assert_eq!(wanted("un-s1"), "running", "no answer: spared");
    assert_eq!(wanted("un-s2"), "running", "JupyterLab silent: spared");
    // Within the window, still spared.
    assert_eq!(
        cohort_controller::reclaim::pass_remembering(&reclaimer, &mut memory)
            .await
            .unwrap(),
        0
    );
    // Unanswered for a whole window: decided on what was last heard (nothing in use).
    tokio::time::sleep(Duration::from_millis(2200)).await;
    assert_eq!(
        cohort_controller::reclaim::pass_remembering(&reclaimer, &mut memory)
            .await
            .unwrap(),
        2,
        "both, after their window"
    );
    assert_eq!(wanted("un-s1"), "stopped");
    assert_eq!(wanted("un-s2"), "stopped");
}

/// Issue 43, **Attach a GPU again**: the reclaimer takes two idle containers' GPUs (a `detach`
/// course; both keep running). One is attached again at once, its device put back on the running
/// container; with the L40S then full, the other waits with the reason and gets it once there is
/// room. Refused, saying why: a container holding its GPU (409), someone else's (not theirs).
#[actix_web::test]
async fn a_gpu_taken_for_idleness_is_attached_again_or_waits_for_room() {
    let _alone = crate::alone().await;
    let (t, node, admin, prof, l40s) = shared_l40s_course(
        "ag",
        2,
        &["s1", "s2"],
        json!({"idle_gpu_minutes": 1, "warn_minutes": 0, "idle_action": "detach"}),
    )
    .await;
    tokio::spawn(worker::run(t.ctl.clone()));
    until("both running", || {
        (state_of(&t, "ag-s1").0 == "running" && state_of(&t, "ag-s2").0 == "running").then_some(())
    })
    .await;
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    let again = |name: &str| format!("/instances/{name}/gpus/attach-again");
    let (status, body) = call!(&app, &prof, "POST", &again("ag-s1"), Body::None);
    assert_eq!(status, 409, "{body}");
    assert!(body.to_string().contains("holds its GPUs"), "{body}");

    // Idle for a reclaim "minute" of one second: both GPUs taken, the containers running.
    poller::poll_all(&t.ctl).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let reclaimer = t.another_configured("reclaimer", |c| c.reclaim.minute_s = 1);
    assert_eq!(
        cohort_controller::reclaim::pass(&reclaimer).await.unwrap(),
        2
    );
    until("both GPUs taken", || {
        let (held, _) = gpu_holders(&t);
        (held.is_empty() && node.calls().detached.len() == 2).then_some(())
    })
    .await;
    assert_eq!(state_of(&t, "ag-s1").0, "running");

    // Another student may not ask for ag-s1's GPU.
    let (_, stranger) = t.user("x-ag", "student");
    let (status, body) = call!(&app, &stranger, "POST", &again("ag-s1"), Body::None);
    assert!(status == 403 || status == 404, "{status} {body}");

    // Their runs began more than one reclaim minute of 4 s ago (the window below).
    tokio::time::sleep(Duration::from_millis(4500)).await;

    // The L40S now takes one container: s1 gets it back at once, on the running container.
    let one = to_json(&UpdateGpu { share_limit: 1 });
    let gpu = format!("/gpus/{l40s}");
    let (status, body) = call!(&app, &admin, "PATCH", &gpu, Body::Json(one));
    assert_eq!(status, 200, "{body}");
    let (status, body) = call!(&app, &prof, "POST", &again("ag-s1"), Body::None);
    assert_eq!(status, 202, "{body}");
    until("s1 holds the L40S again, its device on", || {
        let (held, _) = gpu_holders(&t);
        let on = node
            .calls()
            .attached
            .last()
            .is_some_and(|(n, g)| n == "ag-s1" && g[0].uuid == l40s);
        (held.get("ag-s1") == Some(&vec![l40s.clone()]) && on).then_some(())
    })
    .await;
    let (_, s1) = call!(&app, &prof, "GET", "/instances/ag-s1", Body::None);
    assert_eq!(s1["gpu_detach_reason"], Value::Null, "{s1}");
    assert_eq!(s1["observed_state"], "running", "{s1}");
    // Its idle window starts again from the attach: not taken again for the idleness before.
    let slower = t.another_configured("reclaimer-4s", |c| c.reclaim.minute_s = 4);
    assert_eq!(
        cohort_controller::reclaim::pass(&slower).await.unwrap(),
        0,
        "the GPU just put back stays"
    );

    // s2 waits, saying why, and gets it once the L40S has room again.
    let (status, op) = call!(&app, &prof, "POST", &again("ag-s2"), Body::None);
    assert_eq!(status, 202, "{op}");
    let op_id: uuid::Uuid = op["id"].as_str().expect("id").parse().expect("uuid");
    let waiting = until("s2's request waits with its reason", || {
        use cohort_controller::db::schema::operation_items as items;
        use diesel::prelude::*;
        let error: Option<String> = items::table
            .filter(items::operation_id.eq(op_id))
            .select(items::error)
            .first(&mut t.conn())
            .unwrap();
        error.filter(|e| e.contains("waiting for a GPU"))
    })
    .await;
    assert!(waiting.contains("NVIDIA L40S"), "{waiting}");
    let two = to_json(&UpdateGpu { share_limit: 2 });
    let (status, body) = call!(&app, &admin, "PATCH", &gpu, Body::Json(two));
    assert_eq!(status, 200, "{body}");
    until("s2 holds the L40S again", || {
        let (held, _) = gpu_holders(&t);
        (held.get("ag-s2") == Some(&vec![l40s.clone()])).then_some(())
    })
    .await;
}

/// Issue 43, **Attach a GPU again** from the command line: `cohort gpu reattach` against the
/// controller served over HTTPS (its real server, worker and loops; the node faked at its seam,
/// since no GPU exists here). Before a reclaim it is an `Error:` saying the container holds its
/// GPUs, an unknown container an `Error:` naming it; after an idle detach it waits for the
/// operation and the GPU is back on the running container.
#[actix_web::test]
async fn cohort_gpu_reattach_puts_back_a_gpu_taken_for_idleness() {
    let _alone = crate::alone().await;
    let (t, node, admin, _prof, l40s) = shared_l40s_course(
        "cr",
        2,
        &["s1"],
        json!({"idle_gpu_minutes": 1, "warn_minutes": 0, "idle_action": "detach"}),
    )
    .await;
    let ports = cohort_e2e::PortRange::claim();
    let listen: std::net::SocketAddr = format!("127.0.0.1:{}", ports.port(0)).parse().unwrap();
    let served = t.another_configured("served", |c| c.server.listen = listen);
    actix_web::rt::spawn(cohort_controller::app::server::serve(served));
    until("s1 running", || {
        (state_of(&t, "cr-s1").0 == "running").then_some(())
    })
    .await;
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    let (status, issued) = call!(
        &app,
        &admin,
        "POST",
        "/users/s1/tokens",
        Body::Json(to_json(&CreateApiToken::default()))
    );
    assert_eq!(status, 201, "{issued}");
    let token = issued["token"].as_str().expect("token").to_string();
    let cli = Arc::new(crate::cli_support::Cli {
        conf: tempfile::tempdir().expect("conf dir"),
    });
    // The CLI is a process of its own: run off this thread, which serves it.
    let run = |args: Vec<String>| {
        let cli = cli.clone();
        async move {
            tokio::task::spawn_blocking(move || {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                cli.run(&args)
            })
            .await
            .expect("cohort")
        }
    };
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let url = format!("https://{listen}");
    let added = run(args(&[
        "remote",
        "add",
        "lab",
        &url,
        "--token",
        &token,
        "--accept-certificate",
    ]))
    .await;
    assert!(added.status.success(), "{added:?}");

    // Bad input: nothing taken yet; a container that does not exist.
    let out = run(args(&["gpu", "reattach", "lab:cr-s1"])).await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("Error:") && err.contains("holds its GPUs"),
        "{out:?}"
    );
    let out = run(args(&["gpu", "reattach", "lab:cr-nobody"])).await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("Error:") && err.contains("cr-nobody"),
        "{out:?}"
    );
    let attached_before = node.calls().attached.len();

    // Idle for a reclaim "minute" of one second: the GPU taken, the container running.
    poller::poll_all(&t.ctl).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let reclaimer = t.another_configured("reclaimer", |c| c.reclaim.minute_s = 1);
    assert_eq!(
        cohort_controller::reclaim::pass(&reclaimer).await.unwrap(),
        1
    );
    until("the GPU taken", || {
        let (held, _) = gpu_holders(&t);
        (held.is_empty() && node.calls().detached.contains(&"cr-s1".to_string())).then_some(())
    })
    .await;
    assert_eq!(state_of(&t, "cr-s1").0, "running");

    // `cohort gpu reattach` waits for its operation: the GPU is back when it returns.
    let out = run(args(&["gpu", "reattach", "lab:cr-s1"])).await;
    assert!(out.status.success(), "{out:?}");
    let (held, _) = gpu_holders(&t);
    assert_eq!(held.get("cr-s1"), Some(&vec![l40s.clone()]), "{held:?}");
    {
        let calls = node.calls();
        assert_eq!(
            calls.attached.len(),
            attached_before + 1,
            "{:?}",
            calls.attached
        );
        let (name, gpus) = calls.attached.last().expect("attached");
        assert_eq!(
            (name.as_str(), gpus[0].uuid.as_str()),
            ("cr-s1", l40s.as_str())
        );
    }
    let (_, shown) = call!(&app, &admin, "GET", "/instances/cr-s1", Body::None);
    assert_eq!(shown["gpu_detach_reason"], Value::Null, "{shown}");

    // Taken again for idleness; this time s1 clicks Attach a GPU again on the container's page
    // in Chromium: the page said what happened, and the GPU is back.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    poller::poll_all(&t.ctl).await;
    assert_eq!(
        cohort_controller::reclaim::pass(&reclaimer).await.unwrap(),
        1
    );
    until("the GPU taken again", || {
        let (held, _) = gpu_holders(&t);
        held.is_empty().then_some(())
    })
    .await;
    let attached_before = node.calls().attached.len();
    cohort_e2e::browser::set_portal_password(t.db.url(), t.state.path(), "s1", "gpu again 4 s1");
    let browser = cohort_e2e::browser::Browser::start(ports.port(1), "en").await;
    browser.sign_in(&url, "s1", "gpu again 4 s1").await;
    browser.goto(&format!("{url}/containers/cr-s1")).await;
    let reason = browser.text("#gpu-detach-reason").await;
    assert!(reason.contains("idle_gpu_minutes is 1"), "{reason}");

    // The banners of a budget's and a lease's end warnings (issue 43): a budget cannot be kept
    // and says so; a lease's end offers Keep working.
    let sql = |statement: &str| {
        use diesel::prelude::*;
        diesel::sql_query(statement)
            .execute(&mut t.conn())
            .expect(statement);
    };
    sql(
        "INSERT INTO reclaim_warnings (instance_id, reason, action, warned_at, due_at)
         SELECT id, r, 'detach', now(), now() + interval '1 hour'
           FROM instances, unnest(ARRAY['budget', 'lease_end']) AS r WHERE name = 'cr-s1'",
    );
    browser.goto(&format!("{url}/containers/cr-s1")).await;
    let budget = browser.text(".reclaim-warning[data-reason='budget']").await;
    assert!(
        budget.contains("Your GPU budget runs out")
            && budget.contains("A GPU budget cannot be postponed"),
        "{budget}"
    );
    assert_eq!(
        browser
            .count(".reclaim-warning[data-reason='budget'] button.keep-working")
            .await,
        0
    );
    let lease = browser
        .text(".reclaim-warning[data-reason='lease_end']")
        .await;
    assert!(lease.contains("GPU lease ends"), "{lease}");
    assert_eq!(
        browser
            .count(".reclaim-warning[data-reason='lease_end'] button.keep-working")
            .await,
        1
    );
    sql("DELETE FROM reclaim_warnings");
    browser.goto(&format!("{url}/containers/cr-s1")).await;
    browser.follow("#attach-gpu-again button").await;
    until("s1 holds the L40S after the click", || {
        let (held, _) = gpu_holders(&t);
        (held.get("cr-s1") == Some(&vec![l40s.clone()])).then_some(())
    })
    .await;
    until("the device put back", || {
        let calls = node.calls();
        (calls.attached.len() == attached_before + 1
            && calls.attached.last().is_some_and(|(n, _)| n == "cr-s1"))
        .then_some(())
    })
    .await;
    browser.goto(&format!("{url}/containers/cr-s1")).await;
    assert_eq!(browser.count("#gpu-detach-reason").await, 0);
    assert_eq!(browser.count("#attach-gpu-again").await, 0);
}
