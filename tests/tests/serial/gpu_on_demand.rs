//! Issue 43, GPUs on demand, against the real database with the controller's real API, worker,
//! reclaim pass and poller; the node's agent is faked at its trait seam ([`GpuNode`]) and
//! reports the GPUs of the test NVML library, since no GPU exists here (a real daemon refuses
//! a `gpu` device naming a card the host lacks). An on-demand course makes its containers
//! without a GPU; a student's lease attaches the node's one L40S to the running container;
//! requests wait in fair-share order (fewest GPU hours this period first, then the earliest);
//! an early give back and the lease's end detach it (the container keeps running) with the
//! reason shown and audited; a controller that starts afresh on the same database keeps the
//! queue. Bad input is a 4xx naming the field, with nothing made.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::{test, web, App};
use cohort_controller::app::poller;
use cohort_controller::db::models::operation::Operation;
use cohort_controller::http::api;
use cohort_controller::jobs::worker;
use cohort_e2e::bodies::{
    budget, course, default_lease, gpu_lease, on_demand, to_json, CreateCourse,
};
use cohort_e2e::controller::TestController;
use cohort_e2e::gpu_node::GpuNode;
use cohort_e2e::observe::build_fake_nvml;
use cohort_proto::api::operations::OperationStatus;
use serde_json::{json, Value};

macro_rules! call {
    ($app:expr, $token:expr, $method:expr, $path:expr, $body:expr) => {{
        let req = test::TestRequest::default()
            .method($method.parse().unwrap())
            .uri(&format!("/api/v1{}", $path))
            .insert_header(("authorization", format!("Bearer {}", $token)));
        let body: Option<Value> = $body;
        let req = match body {
            Some(v) => req.set_json(v),
            None => req,
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

/// Runs reclaim passes (each gives the worker a moment) until `done` holds, for at most a minute.
async fn pass_until(
    ctl: &Arc<cohort_controller::app::state::Controller>,
    what: &str,
    done: impl Fn() -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        cohort_controller::reclaim::pass(ctl).await.unwrap();
        if done() {
            return;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Waits until every operation is final; fails on any that did not succeed.
async fn all_done(t: &TestController) {
    let ops = until("operations final", || {
        let ops = Operation::list(&mut t.conn(), None).unwrap();
        ops.iter()
            .all(|o| o.status != OperationStatus::Pending && o.status != OperationStatus::Running)
            .then_some(ops)
    })
    .await;
    assert!(
        ops.iter().all(|o| o.status == OperationStatus::Success),
        "{ops:#?}"
    );
}

/// Instance name -> GPU uuids held.
fn held(t: &TestController) -> Vec<(String, String)> {
    use cohort_controller::db::schema::{gpu_allocations, gpus, instances};
    use diesel::prelude::*;
    gpu_allocations::table
        .inner_join(gpus::table.on(gpus::id.eq(gpu_allocations::gpu_id)))
        .inner_join(instances::table.on(instances::id.eq(gpu_allocations::instance_id)))
        .select((instances::name, gpus::uuid))
        .order(instances::name)
        .load(&mut t.conn())
        .unwrap()
}

/// `hours` of GPU time held this hour by `username`'s container `name` in course `code`, as
/// the poller's accounting records it.
fn used_before(t: &TestController, name: &str, code: &str, username: &str, hours: f64) {
    use diesel::prelude::*;
    diesel::sql_query(
        "INSERT INTO gpu_usage_hours (instance_id, hour, instance_name, course_id, course_code,
                                      owner_id, username, node_name, allocated_s, busy_s)
         SELECT i.id, date_trunc('hour', now()), i.name, i.course_id, $2, i.owner_id, $3,
                'gpu-node', $4, 0
         FROM instances i WHERE i.name = $1
         ON CONFLICT (instance_id, hour) DO UPDATE
            SET allocated_s = gpu_usage_hours.allocated_s + EXCLUDED.allocated_s",
    )
    .bind::<diesel::sql_types::Text, _>(name)
    .bind::<diesel::sql_types::Text, _>(code)
    .bind::<diesel::sql_types::Text, _>(username)
    .bind::<diesel::sql_types::Double, _>(hours * 3600.0)
    .execute(&mut t.conn())
    .unwrap();
}

#[actix_web::test]
async fn on_demand_leases_queue_by_fair_share_end_and_survive_a_restart() {
    let _alone = crate::alone().await;
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let lib = build_fake_nvml(dir.path());
    let node = GpuNode::new(&lib, false);
    let l40s = node.l40s();
    let t = TestController::with_agents(Arc::new(node.clone()));
    let (_, admin) = t.user("admin", "admin");
    let (_, prof) = t.user("prof", "instructor");
    t.image("base");
    t.node("gpu-node", (26200, 26219), 64, 256, true);
    poller::poll_all(&t.ctl).await;
    tokio::spawn(worker::run(t.ctl.clone()));
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    let course = |code: &str| CreateCourse {
        gpus: Some(1),
        gpu_model: Some("NVIDIA L40S".into()),
        ..course(code, "On demand", "base")
    };
    let (status, body) = call!(
        &app,
        &prof,
        "POST",
        "/courses",
        Some(to_json(&course("od")))
    );
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["gpu_mode"], "pinned", "pinned by default: {body}");

    // Bad modes: 400 naming the field, the course unchanged.
    for (bad, field) in [
        (json!({"gpu_mode": "sometimes"}), "gpu_mode"),
        (
            json!({"gpu_mode": "on-demand", "gpu_lease_max_hours": 0}),
            "gpu_lease_max_hours",
        ),
        (
            json!({"gpu_mode": "on-demand", "gpu_lease_max_hours": -2}),
            "gpu_lease_max_hours",
        ),
        (
            json!({"gpu_mode": "on-demand", "gpu_lease_max_hours": 1e6}),
            "gpu_lease_max_hours",
        ),
    ] {
        let (status, body) = call!(
            &app,
            &prof,
            "PUT",
            "/courses/od/gpu-mode",
            Some(bad.clone())
        );
        assert_eq!(
            (status, &body["error"]["field"]),
            (400, &json!(field)),
            "{bad}: {body}"
        );
    }
    let mode = to_json(&on_demand(3.0));
    let (status, body) = call!(&app, &prof, "PUT", "/courses/od/gpu-mode", Some(mode));
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (&body["gpu_mode"], &body["gpu_lease_max_hours"]),
        (&json!("on-demand"), &json!(3.0))
    );

    // A pinned course beside it (no GPU asked, so its container is placed anywhere).
    let mut pinned = course("pn");
    pinned.gpus = Some(0);
    let (status, body) = call!(&app, &prof, "POST", "/courses", Some(to_json(&pinned)));
    assert_eq!(status, 201, "{body}");

    let mut tokens = std::collections::BTreeMap::new();
    for s in ["ann", "bob", "cat"] {
        tokens.insert(s, t.user(s, "student").1);
    }
    let roster = |names: &[&str]| {
        let mut r = String::from("username,name,email,ssh_key\n");
        for s in names {
            r.push_str(&format!("{s},{s},,\n"));
        }
        r
    };
    for (code, names) in [("od", &["ann", "bob", "cat"][..]), ("pn", &["ann"][..])] {
        let req = test::TestRequest::post()
            .uri(&format!("/api/v1/courses/{code}/roster"))
            .insert_header(("authorization", format!("Bearer {prof}")))
            .insert_header(("content-type", "text/csv"))
            .set_payload(roster(names))
            .to_request();
        let res = test::call_service(&app, req).await;
        assert_eq!(res.status().as_u16(), 200);
        let (status, body) = call!(
            &app,
            &prof,
            "POST",
            &format!("/courses/{code}/provision"),
            None
        );
        assert_eq!(status, 202, "{body}");
    }
    all_done(&t).await;
    // On demand: made and running without a GPU.
    assert!(held(&t).is_empty(), "{:?}", held(&t));
    assert!(
        node.calls().creates.iter().all(|c| c.gpus.is_empty()),
        "created without a GPU"
    );

    // Bad input: nothing queued by any of these.
    let lease = |name: &str| format!("/instances/{name}/gpu-lease");
    let ann = tokens["ann"].clone();
    for hours in [json!(-1), json!(0), json!(1e9), json!(4)] {
        let (status, body) = call!(
            &app,
            &ann,
            "POST",
            &lease("od-ann"),
            Some(json!({"hours": hours}))
        );
        assert_eq!(
            (status, &body["error"]["field"]),
            (400, &json!("hours")),
            "{hours}: {body}"
        );
    }
    let (status, body) = call!(
        &app,
        &tokens["bob"],
        "POST",
        &lease("od-ann"),
        Some(to_json(&default_lease()))
    );
    assert_eq!(status, 403, "another student's container: {body}");
    let (status, body) = call!(
        &app,
        &ann,
        "POST",
        &lease("pn-ann"),
        Some(to_json(&default_lease()))
    );
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["field"], "gpu_mode", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("pins its GPUs"),
        "{body}"
    );
    let (status, all) = call!(&app, &admin, "GET", "/gpu-leases", None);
    assert_eq!((status, all.clone()), (200, json!([])), "nothing half-made");

    // Ann gets the free GPU at once (the default lease: 2 hours).
    let (status, body) = call!(
        &app,
        &ann,
        "POST",
        &lease("od-ann"),
        Some(to_json(&default_lease()))
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (&body["state"], &body["gpu"], &body["hours"]),
        (&json!("active"), &json!(l40s), &json!(2.0)),
        "{body}"
    );
    all_done(&t).await;
    assert_eq!(held(&t), [("od-ann".to_string(), l40s.clone())]);
    {
        let calls = node.calls();
        let (name, gpus) = calls.attached.last().expect("the GPU attached");
        assert_eq!(
            (name.as_str(), gpus.len(), gpus[0].uuid.as_str()),
            ("od-ann", 1, l40s.as_str())
        );
        assert!(
            !calls.events.iter().any(|e| e == "stop od-ann"),
            "attached while it runs: {:?}",
            calls.events
        );
    }

    // Bob, who held a GPU two hours this week, asks first; Cat, who held none, after him.
    used_before(&t, "od-bob", "od", "bob", 2.0);
    let (status, body) = call!(
        &app,
        &tokens["bob"],
        "POST",
        &lease("od-bob"),
        Some(to_json(&gpu_lease(1.0)))
    );
    assert_eq!(
        (status, &body["state"], &body["place"]),
        (200, &json!("queued"), &json!(1)),
        "{body}"
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
    let (status, body) = call!(
        &app,
        &tokens["cat"],
        "POST",
        &lease("od-cat"),
        Some(to_json(&gpu_lease(1.0)))
    );
    assert_eq!(
        (status, &body["state"], &body["place"]),
        (200, &json!("queued"), &json!(1)),
        "fair share puts Cat first: {body}"
    );
    assert!(
        body["why"].as_str().unwrap_or("").contains("first in line"),
        "{body}"
    );
    let (_, bob) = call!(&app, &tokens["bob"], "GET", &lease("od-bob"), None);
    assert_eq!(bob["place"], 2, "{bob}");
    let why = bob["why"].as_str().unwrap_or("");
    assert!(
        why.contains("fewer GPU hours") && why.contains("2 GPU hours used this week"),
        "{why}"
    );

    // The controller starts afresh on the same database (nothing but the rows carries over), with
    // a lease hour of two seconds: the queue is still there, in the same order.
    let restarted = t.another_configured("restarted", |c| c.reclaim.lease_hour_s = 2);
    let app = test::init_service(
        App::new().configure(api::configure(web::Data::from(restarted.clone()))),
    )
    .await;
    let (_, queue) = call!(&app, &admin, "GET", "/gpu-leases", None);
    let order: Vec<(&str, &str, Option<u64>)> = queue
        .as_array()
        .expect("leases")
        .iter()
        .map(|l| {
            (
                l["instance"].as_str().unwrap_or(""),
                l["state"].as_str().unwrap_or(""),
                l["place"].as_u64(),
            )
        })
        .collect();
    assert_eq!(
        order,
        [
            ("od-ann", "active", None),
            ("od-cat", "queued", Some(1)),
            ("od-bob", "queued", Some(2))
        ],
        "{queue}"
    );
    assert_eq!(
        cohort_controller::reclaim::pass(&restarted).await.unwrap(),
        0,
        "the GPU is Ann's"
    );

    // Ann gives it back early: detached (running still), the reason shown; Cat gets it.
    let (status, body) = call!(&app, &ann, "DELETE", &lease("od-ann"), None);
    assert_eq!((status, &body["state"]), (200, &json!("ended")), "{body}");
    assert!(
        body["end_reason"]
            .as_str()
            .unwrap_or("")
            .contains("given back early"),
        "{body}"
    );
    all_done(&t).await;
    assert!(node.calls().detached.contains(&"od-ann".to_string()));
    let (_, shown) = call!(&app, &ann, "GET", "/instances/od-ann", None);
    assert_eq!(shown["desired_state"], "running", "{shown}");
    assert!(
        shown["gpu_detach_reason"]
            .as_str()
            .unwrap_or("")
            .contains("given back early"),
        "{shown}"
    );
    assert_eq!(
        cohort_controller::reclaim::pass(&restarted).await.unwrap(),
        1
    );
    all_done(&t).await;
    assert_eq!(
        held(&t),
        [("od-cat".to_string(), l40s.clone())],
        "Cat, with fewer hours, first"
    );
    assert_eq!(
        node.calls().attached.last().map(|(n, _)| n.as_str()),
        Some("od-cat")
    );

    // Ann asks again and leaves the queue.
    let (_, body) = call!(
        &app,
        &ann,
        "POST",
        &lease("od-ann"),
        Some(to_json(&gpu_lease(0.5)))
    );
    assert_eq!(body["state"], "queued", "{body}");
    let (status, body) = call!(&app, &ann, "DELETE", &lease("od-ann"), None);
    assert_eq!(
        (status, &body["state"]),
        (200, &json!("cancelled")),
        "{body}"
    );

    // Cat's lease of one (two-second) hour ends: detached with the reason, still running; Bob
    // gets the GPU next.
    pass_until(&restarted, "Cat's lease ended", || {
        use cohort_controller::db::schema::instance_usage;
        use diesel::prelude::*;
        instance_usage::table
            .select(instance_usage::detach_reason)
            .load::<Option<String>>(&mut t.conn())
            .unwrap()
            .iter()
            .flatten()
            .any(|r| r.starts_with("GPU lease of 1 hours"))
    })
    .await;
    all_done(&t).await;
    let (_, cat) = call!(&app, &tokens["cat"], "GET", &lease("od-cat"), None);
    assert_eq!(cat["state"], "ended", "{cat}");
    assert!(
        cat["end_reason"]
            .as_str()
            .unwrap_or("")
            .starts_with("GPU lease of 1 hours ended at"),
        "{cat}"
    );
    let (_, shown) = call!(&app, &tokens["cat"], "GET", "/instances/od-cat", None);
    assert_eq!(shown["desired_state"], "running", "{shown}");
    assert!(
        shown["gpu_detach_reason"]
            .as_str()
            .unwrap_or("")
            .starts_with("GPU lease of 1 hours ended"),
        "{shown}"
    );
    assert!(node.calls().detached.contains(&"od-cat".to_string()));
    pass_until(&restarted, "Bob granted", || {
        held(&t) == [("od-bob".to_string(), l40s.clone())]
    })
    .await;
    all_done(&t).await;
    assert_eq!(
        node.calls().attached.last().map(|(n, _)| n.as_str()),
        Some("od-bob")
    );
    let (_, audit) = call!(&app, &admin, "GET", "/audit?object=od-cat", None);
    let actions: Vec<(&str, &str)> = audit["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| {
            (
                e["actor"].as_str().unwrap_or(""),
                e["action"].as_str().unwrap_or(""),
            )
        })
        .collect();
    for want in [
        ("cat", "request_gpu"),
        ("gpu-lease", "attach_gpus"),
        ("gpu-lease", "detach_gpus"),
    ] {
        assert!(actions.contains(&want), "{want:?} in {audit}");
    }

    // Bob gives the GPU back; the node then loses its NVIDIA runtime (the toolkit removed):
    // Ann's request waits though the GPU is free, saying why, since a GPU attached there would
    // have no driver.
    let (status, body) = call!(&app, &tokens["bob"], "DELETE", &lease("od-bob"), None);
    assert_eq!(status, 200, "{body}");
    all_done(&t).await;
    {
        use cohort_controller::db::schema::nodes;
        use diesel::prelude::*;
        diesel::update(nodes::table)
            .set(nodes::nvidia_runtime.eq(false))
            .execute(&mut t.conn())
            .unwrap();
    }
    let (status, body) = call!(
        &app,
        &ann,
        "POST",
        &lease("od-ann"),
        Some(to_json(&gpu_lease(0.5)))
    );
    assert_eq!((status, &body["state"]), (200, &json!("queued")), "{body}");
    assert!(
        body["why"]
            .as_str()
            .unwrap_or("")
            .contains("has no NVIDIA container runtime"),
        "{body}"
    );
    cohort_controller::reclaim::pass(&restarted).await.unwrap();
    all_done(&t).await;
    assert!(held(&t).is_empty(), "nothing granted there: {:?}", held(&t));
    assert!(
        started.elapsed() < Duration::from_secs(90),
        "{:?}",
        started.elapsed()
    );
}

/// Instance `name`'s pending reclaim warnings, as its student reads them.
macro_rules! warnings_of {
    ($app:expr, $token:expr, $name:expr) => {{
        let (status, body) = call!(
            $app,
            $token,
            "GET",
            &format!("/instances/{}/reclaim-warnings", $name),
            None
        );
        assert_eq!(status, 200, "{body}");
        body
    }};
}

fn time_of(v: &Value) -> chrono::DateTime<chrono::Utc> {
    v.as_str()
        .unwrap_or_else(|| panic!("a time: {v}"))
        .parse()
        .unwrap_or_else(|e| panic!("{v}: {e}"))
}

/// What the controller wrote to `name`'s terminals.
fn told(node: &GpuNode, name: &str) -> Vec<String> {
    node.calls()
        .notices
        .iter()
        .filter(|(n, _)| n == name)
        .map(|(_, text)| text.clone())
        .collect()
}

/// Issue 43, "warned before any reclaim": a lease's end and a budget's detach are warned like
/// the idle and longest-run reclaims: a row (`reclaim_warnings`) that a restarted controller
/// keeps, told once to the container's terminals, shown by the API; the reclaim waits for it.
/// Keep working extends a lease once, never past the course's longest lease; a budget cannot
/// be postponed, and says so. A reclaim minute is 1 s and a lease hour 20 s here, so the
/// course's default `warn_minutes` (10) is 10 s.
#[actix_web::test]
async fn a_lease_end_and_a_budget_detach_are_warned_first() {
    let _alone = crate::alone().await;
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let lib = build_fake_nvml(dir.path());
    let node = GpuNode::new(&lib, false);
    let t = TestController::with_agents(Arc::new(node.clone()));
    let (_, prof) = t.user("prof", "instructor");
    t.image("base");
    t.node("gpu-node", (26220, 26239), 64, 256, true);
    poller::poll_all(&t.ctl).await;
    tokio::spawn(worker::run(t.ctl.clone()));
    let fast = |c: &mut cohort_controller::app::config::Config| {
        c.reclaim.minute_s = 1;
        c.reclaim.lease_hour_s = 20;
    };
    let ctl = t.another_configured("fast", fast);
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(ctl.clone()))))
            .await;
    let course = CreateCourse {
        gpus: Some(1),
        gpu_model: Some("NVIDIA L40S".into()),
        ..course("wl", "Warned leases", "base")
    };
    let (status, body) = call!(&app, &prof, "POST", "/courses", Some(to_json(&course)));
    assert_eq!(status, 201, "{body}");
    let mode = to_json(&on_demand(2.0));
    let (status, body) = call!(&app, &prof, "PUT", "/courses/wl/gpu-mode", Some(mode));
    assert_eq!(status, 200, "{body}");
    let budget = to_json(&budget(1.0, "week"));
    let (status, body) = call!(&app, &prof, "PUT", "/courses/wl/budget", Some(budget));
    assert_eq!(status, 200, "{body}");
    let (ann, bob) = (t.user("ann", "student").1, t.user("bob", "student").1);
    let req = test::TestRequest::post()
        .uri("/api/v1/courses/wl/roster")
        .insert_header(("authorization", format!("Bearer {prof}")))
        .insert_header(("content-type", "text/csv"))
        .set_payload("username,name,email,ssh_key\nann,ann,,\nbob,bob,,\n")
        .to_request();
    assert_eq!(test::call_service(&app, req).await.status().as_u16(), 200);
    let (status, body) = call!(&app, &prof, "POST", "/courses/wl/provision", None);
    assert_eq!(status, 202, "{body}");
    all_done(&t).await;
    // The poller sees them running (what the budget's pass looks at).
    poller::poll_all(&t.ctl).await;

    // Ann's lease of one hour (20 s): warned 10 s before its end, in her terminals and the API.
    let lease = |name: &str| format!("/instances/{name}/gpu-lease");
    let (status, granted) = call!(
        &app,
        &ann,
        "POST",
        &lease("wl-ann"),
        Some(to_json(&gpu_lease(1.0)))
    );
    assert_eq!(
        (status, &granted["state"]),
        (200, &json!("active")),
        "{granted}"
    );
    let ends_at = time_of(&granted["ends_at"]);
    all_done(&t).await;
    pass_until(&ctl, "Ann's lease end warned", || {
        !told(&node, "wl-ann").is_empty()
    })
    .await;
    let warned = warnings_of!(&app, &ann, "wl-ann");
    assert_eq!(
        (&warned[0]["reason"], &warned[0]["action"]),
        (&json!("lease_end"), &json!("detach")),
        "{warned}"
    );
    let (warned_at, first_due) = (
        time_of(&warned[0]["warned_at"]),
        time_of(&warned[0]["due_at"]),
    );
    assert_eq!(
        first_due - warned_at,
        chrono::Duration::seconds(10),
        "{warned}"
    );
    assert!(
        first_due >= ends_at && warned_at <= ends_at - chrono::Duration::seconds(9),
        "warned at {warned_at}, the lease ends at {ends_at}"
    );
    let text = &told(&node, "wl-ann")[0];
    assert!(
        text.starts_with("Cohort: the GPU lease of wl-ann ends: its GPU will be detached at")
            && text.contains("extends it once, up to the course's longest lease"),
        "{text}"
    );

    // Keep working: once, by the warning's 10 s; the lease itself runs on to then.
    let keep = |name: &str| format!("/instances/{name}/keep-working");
    let (status, kept) = call!(&app, &bob, "POST", &keep("wl-ann"), None);
    assert_eq!(status, 403, "another student's: {kept}");
    let (status, kept) = call!(&app, &ann, "POST", &keep("wl-ann"), None);
    assert_eq!(status, 200, "{kept}");
    let due = time_of(&kept[0]["due_at"]);
    assert_eq!(due, first_due + chrono::Duration::seconds(10), "{kept}");
    let (_, shown) = call!(&app, &ann, "GET", &lease("wl-ann"), None);
    assert_eq!(time_of(&shown["ends_at"]), due, "{shown}");
    let (status, again) = call!(&app, &ann, "POST", &keep("wl-ann"), None);
    assert_eq!(status, 409, "{again}");
    assert!(
        again["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("already used"),
        "{again}"
    );

    // The end waits for the kept due; the GPU is then detached, the container running.
    pass_until(&ctl, "Ann's lease ended", || held(&t).is_empty()).await;
    let (_, ended) = call!(&app, &ann, "GET", &lease("wl-ann"), None);
    assert_eq!(ended["state"], "ended", "{ended}");
    assert!(
        time_of(&ended["ended_at"]) >= due,
        "ended before its kept due {due}: {ended}"
    );
    all_done(&t).await;
    assert!(node.calls().detached.contains(&"wl-ann".to_string()));
    assert_eq!(warnings_of!(&app, &ann, "wl-ann"), json!([]));
    assert_eq!(told(&node, "wl-ann").len(), 1, "told once");

    // A lease already as long as the course allows: Keep working cannot extend it.
    let (status, body) = call!(
        &app,
        &ann,
        "POST",
        &lease("wl-ann"),
        Some(to_json(&gpu_lease(2.0)))
    );
    assert_eq!((status, &body["state"]), (200, &json!("active")), "{body}");
    all_done(&t).await;
    pass_until(&ctl, "Ann's second lease end warned", || {
        told(&node, "wl-ann").len() == 2
    })
    .await;
    let (status, refused) = call!(&app, &ann, "POST", &keep("wl-ann"), None);
    assert_eq!(status, 409, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("longest lease"),
        "{refused}"
    );
    let (status, body) = call!(&app, &ann, "DELETE", &lease("wl-ann"), None);
    assert_eq!((status, &body["state"]), (200, &json!("ended")), "{body}");
    assert_eq!(
        warnings_of!(&app, &ann, "wl-ann"),
        json!([]),
        "a lease given back takes its warning with it"
    );
    all_done(&t).await;

    // Bob holds a GPU with his hour of budget used: the detach is warned first, not done.
    let (status, body) = call!(
        &app,
        &bob,
        "POST",
        &lease("wl-bob"),
        Some(to_json(&gpu_lease(2.0)))
    );
    assert_eq!((status, &body["state"]), (200, &json!("active")), "{body}");
    all_done(&t).await;
    used_before(&t, "wl-bob", "wl", "bob", 1.0);
    cohort_controller::reclaim::pass(&ctl).await.unwrap();
    assert_eq!(held(&t).len(), 1, "not detached before its warning");
    let (_, shown) = call!(&app, &bob, "GET", "/instances/wl-bob", None);
    assert_eq!(
        shown["gpu_detach_reason"],
        Value::Null,
        "no detach before its warning: {shown}"
    );
    let warned = warnings_of!(&app, &bob, "wl-bob");
    let budget_warning = warned
        .as_array()
        .and_then(|ws| ws.iter().find(|w| w["reason"] == "budget"))
        .unwrap_or_else(|| panic!("a budget warning: {warned}"))
        .clone();
    let due = time_of(&budget_warning["due_at"]);
    assert_eq!(
        due - time_of(&budget_warning["warned_at"]),
        chrono::Duration::seconds(10),
        "{budget_warning}"
    );
    let budget_told: Vec<String> = told(&node, "wl-bob")
        .into_iter()
        .filter(|t| t.contains("budget"))
        .collect();
    assert_eq!(budget_told.len(), 1, "{budget_told:?}");
    assert!(
        budget_told[0]
            .starts_with("Cohort: your GPU budget runs out: wl-bob's GPU will be detached at")
            && budget_told[0].contains("This cannot be postponed"),
        "{}",
        budget_told[0]
    );
    let (status, refused) = call!(&app, &bob, "POST", &keep("wl-bob"), None);
    assert_eq!(status, 409, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("a GPU budget cannot be postponed"),
        "{refused}"
    );

    // A controller started afresh on the same database neither tells again nor detaches early.
    let restarted = t.another_configured("restarted", fast);
    pass_until(&restarted, "Bob's GPU detached", || held(&t).is_empty()).await;
    let (_, shown) = call!(&app, &bob, "GET", "/instances/wl-bob", None);
    assert!(
        shown["gpu_detach_reason"]
            .as_str()
            .unwrap_or("")
            .starts_with("GPU budget used up"),
        "{shown}"
    );
    assert_eq!(shown["desired_state"], "running", "{shown}");
    {
        use cohort_controller::db::schema::instance_usage;
        use diesel::prelude::*;
        let at: Vec<Option<chrono::DateTime<chrono::Utc>>> = instance_usage::table
            .select(instance_usage::gpus_detached_at)
            .filter(instance_usage::detach_reason.like("GPU budget used up%"))
            .load(&mut t.conn())
            .unwrap();
        assert!(
            at.iter().flatten().all(|at| *at >= due),
            "detached at {at:?}, before the warning's due {due}"
        );
    }
    all_done(&t).await;
    let runs_out = told(&node, "wl-bob")
        .iter()
        .filter(|t| t.contains("budget runs out"))
        .count();
    assert_eq!(runs_out, 1, "told once: {:?}", told(&node, "wl-bob"));
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "{:?}",
        started.elapsed()
    );
}
