//! Issue 44, batch jobs with GPUs, against the real database with the controller's real API,
//! worker, jobs pass and lease queue; the node's agent is faked at its trait seam ([`GpuNode`]):
//! no GPU exists here (a real daemon refuses a `gpu` device naming a card the host lacks). The
//! fake node also answers the jobs' execs, its test deciding when a job ends; what those execs
//! do in a real container is tested on real LXD in `it batch_jobs`.
//!
//! Three students' jobs want the node's one L40S: the first gets it at once and starts once it
//! is attached; the two others wait in fair order (fewest GPU hours first), until the course's
//! staff raises one's priority; a job's end gives the GPU back (detached, the container still
//! running) and the next starts; a job at its limit is warned, stopped and killed; a node that
//! does not answer leaves a job `unknown` until it does; a controller started afresh on the
//! same database carries on; a cancelled running job is stopped. Bad
//! input is a 400 naming the field, with nothing queued.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::{test, web, App};
use cohort_controller::app::poller;
use cohort_controller::app::state::Controller;
use cohort_controller::db::models::operation::Operation;
use cohort_controller::http::api;
use cohort_controller::jobs::worker;
use cohort_e2e::bodies::{course, on_demand, to_json, CreateCourse};
use cohort_e2e::controller::TestController;
use cohort_e2e::gpu_node::GpuNode;
use cohort_e2e::observe::build_fake_nvml;
use cohort_proto::api::batch_jobs::JobPriority;
use cohort_proto::api::operations::OperationStatus;
use diesel::prelude::*;
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

/// Waits until every operation is final; fails on any that did not succeed.
async fn all_done(t: &TestController) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ops = Operation::list(&mut t.conn(), None).unwrap();
        let open = ops
            .iter()
            .any(|o| o.status == OperationStatus::Pending || o.status == OperationStatus::Running);
        if !open {
            assert!(
                ops.iter().all(|o| o.status == OperationStatus::Success),
                "{ops:#?}"
            );
            return;
        }
        assert!(Instant::now() < deadline, "operations not final");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs jobs passes (the worker between them) until job `id` is `state`, for at most a minute;
/// answers the job and how long it took.
async fn pass_until(
    ctl: &Arc<Controller>,
    t: &TestController,
    id: i64,
    state: &str,
) -> (Value, Duration) {
    let started = Instant::now();
    let deadline = started + Duration::from_secs(60);
    loop {
        cohort_controller::batch::runner::pass(ctl).await.unwrap();
        let job = shown(t, id);
        if job["state"] == state {
            return (job, started.elapsed());
        }
        assert!(Instant::now() < deadline, "job {id} never {state}: {job}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Job `id` as the API shows it, read with the admin's view.
fn shown(t: &TestController, id: i64) -> Value {
    use cohort_controller::db::models::batch_job::BatchJob;
    let mut conn = t.conn();
    let job = BatchJob::find(&mut conn, id).unwrap().expect("the job");
    serde_json::to_value(cohort_controller::batch::view(&mut conn, &job).unwrap()).unwrap()
}

/// Instance name -> GPU uuids held.
fn held(t: &TestController) -> Vec<(String, String)> {
    use cohort_controller::db::schema::{gpu_allocations, gpus, instances};
    gpu_allocations::table
        .inner_join(gpus::table.on(gpus::id.eq(gpu_allocations::gpu_id)))
        .inner_join(instances::table.on(instances::id.eq(gpu_allocations::instance_id)))
        .select((instances::name, gpus::uuid))
        .order(instances::name)
        .load(&mut t.conn())
        .unwrap()
}

#[actix_web::test]
async fn gpu_jobs_wait_their_fair_turn_and_give_the_gpu_back() {
    let _alone = crate::alone().await;
    let dir = tempfile::tempdir().unwrap();
    let lib = build_fake_nvml(dir.path());
    let node = GpuNode::new(&lib, false);
    let l40s = node.l40s();
    let t = TestController::with_agents(Arc::new(node.clone()));
    let (_, admin) = t.user("admin", "admin");
    let (_, prof) = t.user("prof", "instructor");
    t.image("base");
    t.node("gpu-node", (26220, 26239), 64, 256, true);
    poller::poll_all(&t.ctl).await;
    tokio::spawn(worker::run(t.ctl.clone()));
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    let course = CreateCourse {
        gpus: Some(1),
        gpu_model: Some("NVIDIA L40S".into()),
        ..course("gj", "GPU jobs", "base")
    };
    let (status, body) = call!(&app, &prof, "POST", "/courses", Some(to_json(&course)));
    assert_eq!(status, 201, "{body}");
    let mode = to_json(&on_demand(3.0));
    let (status, body) = call!(&app, &prof, "PUT", "/courses/gj/gpu-mode", Some(mode));
    assert_eq!(status, 200, "{body}");
    let mut tokens = std::collections::BTreeMap::new();
    let mut roster = String::from("username,name,email,ssh_key\n");
    for s in ["ann", "bob", "cat"] {
        tokens.insert(s, t.user(s, "student").1);
        roster.push_str(&format!("{s},{s},,\n"));
    }
    let req = test::TestRequest::post()
        .uri("/api/v1/courses/gj/roster")
        .insert_header(("authorization", format!("Bearer {prof}")))
        .insert_header(("content-type", "text/csv"))
        .set_payload(roster)
        .to_request();
    assert_eq!(test::call_service(&app, req).await.status().as_u16(), 200);
    let (status, body) = call!(&app, &prof, "POST", "/courses/gj/provision", None);
    assert_eq!(status, 202, "{body}");
    all_done(&t).await;
    assert!(held(&t).is_empty(), "on demand: made without a GPU");

    let submit = |who: &str, name: &str, body: Value| {
        let mut body = body;
        body["instance"] = json!(name);
        (tokens[who].clone(), body)
    };
    // Bad input: 400 naming the field, nothing queued.
    for (body, field) in [
        (json!({"command": ["train"], "gpus": 2}), "gpus"),
        (
            json!({"command": ["train"], "gpus": 1, "hours": 4}),
            "hours",
        ),
    ] {
        let (token, body) = submit("ann", "gj-ann", body);
        let (status, answer) = call!(&app, &token, "POST", "/jobs", Some(body.clone()));
        assert_eq!(
            (status, &answer["error"]["field"]),
            (400, &json!(field)),
            "{body}: {answer}"
        );
    }
    let (_, all) = call!(&app, &admin, "GET", "/jobs", None);
    assert_eq!(all, json!([]), "nothing queued");

    // Ann's job gets the free GPU; it starts once the GPU is attached.
    let (token, body) = submit(
        "ann",
        "gj-ann",
        json!({"command": ["python", "train.py"], "gpus": 1, "hours": 1}),
    );
    let (status, ann_job) = call!(&app, &token, "POST", "/jobs", Some(body));
    assert_eq!(status, 201, "{ann_job}");
    let ann_id = ann_job["id"].as_i64().unwrap();
    let (job, _) = pass_until(&t.ctl, &t, ann_id, "running").await;
    assert_eq!(job["gpu"], json!(l40s), "{job}");
    assert_eq!(held(&t), [("gj-ann".to_string(), l40s.clone())]);
    {
        let calls = node.calls();
        let attached = calls.events.iter().position(|e| e == "attach gj-ann");
        let attached = attached.or_else(|| calls.attached.iter().position(|(n, _)| n == "gj-ann"));
        assert!(attached.is_some(), "{:?}", calls.events);
        assert_eq!(calls.job_events, [format!("start {ann_id}")]);
    }

    // Bob, who held a GPU two hours this week, submits first; Cat, with none, after: Cat waits
    // first (fair share) until the staff raises Bob's job.
    {
        use diesel::sql_types::Text;
        diesel::sql_query(
            "INSERT INTO gpu_usage_hours (instance_id, hour, instance_name, course_id, course_code,
                                          owner_id, username, node_name, allocated_s, busy_s)
             SELECT i.id, date_trunc('hour', now()), i.name, i.course_id, 'gj', i.owner_id, $2,
                    'gpu-node', 7200, 0
             FROM instances i WHERE i.name = $1",
        )
        .bind::<Text, _>("gj-bob")
        .bind::<Text, _>("bob")
        .execute(&mut t.conn())
        .unwrap();
    }
    let mut ids = Vec::new();
    for who in ["bob", "cat"] {
        let (token, body) = submit(
            who,
            &format!("gj-{who}"),
            json!({"command": ["train"], "gpus": 1, "hours": 1}),
        );
        let (status, job) = call!(&app, &token, "POST", "/jobs", Some(body));
        assert_eq!(status, 201, "{job}");
        ids.push(job["id"].as_i64().unwrap());
        cohort_controller::batch::runner::pass(&t.ctl)
            .await
            .unwrap();
    }
    let (bob_id, cat_id) = (ids[0], ids[1]);
    let (bob, cat) = (shown(&t, bob_id), shown(&t, cat_id));
    assert_eq!(
        (&cat["state"], &cat["place"]),
        (&json!("queued"), &json!(1)),
        "{cat}"
    );
    assert_eq!(bob["place"], 2, "{bob}");
    assert!(
        bob["why"]
            .as_str()
            .unwrap_or("")
            .contains("fewer GPU hours"),
        "{bob}"
    );
    let (status, _) = call!(
        &app,
        &tokens["bob"],
        "PUT",
        &format!("/jobs/{bob_id}/priority"),
        Some(to_json(&JobPriority { priority: 10 }))
    );
    assert_eq!(status, 403, "a student does not set priorities");
    let (status, body) = call!(
        &app,
        &prof,
        "PUT",
        &format!("/jobs/{bob_id}/priority"),
        Some(to_json(&JobPriority { priority: 10 }))
    );
    assert_eq!((status, &body["priority"]), (200, &json!(10)), "{body}");
    assert_eq!(shown(&t, bob_id)["place"], 1, "raised ahead of fair share");

    // Ann's job ends: its GPU-seconds are counted, the GPU goes back, Bob's job starts on it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    node.calls().jobs.insert(ann_id.to_string(), Some(0));
    let (job, _) = pass_until(&t.ctl, &t, ann_id, "succeeded").await;
    assert_eq!(job["exit_code"], 0, "{job}");
    assert!(job["gpu_seconds"].as_f64().unwrap() >= 0.5, "{job}");
    let (bob, took) = pass_until(&t.ctl, &t, bob_id, "running").await;
    eprintln!("[batch_gpu_jobs] from Ann's end recorded to Bob's job running: {took:?}");
    assert_eq!(bob["gpu"], json!(l40s), "{bob}");
    assert!(node.calls().detached.contains(&"gj-ann".to_string()));
    assert_eq!(held(&t), [("gj-bob".to_string(), l40s.clone())]);
    let (_, shown_ann) = call!(&app, &admin, "GET", "/instances/gj-ann", None);
    assert_eq!(shown_ann["desired_state"], "running", "{shown_ann}");

    // Bob's job near its limit is warned, then stopped at it: killed, the GPU to Cat.
    diesel::sql_query("UPDATE batch_jobs SET ends_at = now() + interval '2 seconds' WHERE id = $1")
        .bind::<diesel::sql_types::BigInt, _>(bob_id)
        .execute(&mut t.conn())
        .unwrap();
    let (bob, _) = pass_until(&t.ctl, &t, bob_id, "killed").await;
    assert!(
        bob["reason"]
            .as_str()
            .unwrap_or("")
            .contains("reached its time limit of 1 hours"),
        "{bob}"
    );
    assert_eq!(bob["exit_code"], 143, "{bob}");
    {
        let events = node.calls().job_events.clone();
        let warned = events.iter().position(|e| {
            e.starts_with(&format!(
                "tell {bob_id}: cohort: job {bob_id} reaches its time limit"
            ))
        });
        let stopped = events.iter().position(|e| *e == format!("stop {bob_id}"));
        assert!(
            matches!((warned, stopped), (Some(w), Some(s)) if w < s),
            "warned, then stopped: {events:?}"
        );
    }
    pass_until(&t.ctl, &t, cat_id, "running").await;
    assert_eq!(held(&t), [("gj-cat".to_string(), l40s.clone())]);

    // A node that does not answer leaves the job `unknown`, with why, until it answers again.
    node.calls().jobs_unreachable = true;
    let (cat, _) = pass_until(&t.ctl, &t, cat_id, "unknown").await;
    assert!(
        cat["reason"]
            .as_str()
            .unwrap_or("")
            .contains("does not answer"),
        "{cat}"
    );
    assert_eq!(
        held(&t),
        [("gj-cat".to_string(), l40s.clone())],
        "the GPU stays"
    );
    node.calls().jobs_unreachable = false;
    let (cat, _) = pass_until(&t.ctl, &t, cat_id, "running").await;
    assert_eq!(cat["reason"], Value::Null, "{cat}");

    // A controller started afresh on the same database carries on: Cat's job ends with its code.
    let restarted = t.another_process("restarted");
    node.calls().jobs.insert(cat_id.to_string(), Some(5));
    let (cat, _) = pass_until(&restarted, &t, cat_id, "failed").await;
    assert_eq!(
        (&cat["exit_code"], &cat["reason"]),
        (&json!(5), &json!("exited with code 5")),
        "{cat}"
    );
    all_done(&t).await;
    assert!(held(&t).is_empty(), "every GPU given back: {:?}", held(&t));

    // A running job cancelled is stopped, and ends cancelled with TERM's code.
    let (token, body) = submit("ann", "gj-ann", json!({"command": ["train"], "gpus": 1}));
    let (_, job) = call!(&app, &token, "POST", "/jobs", Some(body));
    let again = job["id"].as_i64().unwrap();
    pass_until(&t.ctl, &t, again, "running").await;
    let (status, _) = call!(
        &app,
        &tokens["cat"],
        "POST",
        &format!("/jobs/{again}/cancel"),
        None
    );
    assert_eq!(status, 404, "not Cat's to see");
    let (status, _) = call!(&app, &token, "POST", &format!("/jobs/{again}/cancel"), None);
    assert_eq!(status, 200);
    let (job, _) = pass_until(&t.ctl, &t, again, "cancelled").await;
    assert_eq!(job["exit_code"], 143, "{job}");
    all_done(&t).await;
    assert!(held(&t).is_empty(), "{:?}", held(&t));
}
