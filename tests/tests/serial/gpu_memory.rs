//! Issue 48, a course's GPU memory cap as the controller hands it to the node, against the real
//! database with the controller's real poller, placement and worker (the node's agent faked at
//! its trait seam, [`GpuNode`], reporting the test NVML library's GPUs): a sharing course's
//! `gpu_memory_mib` (or, by default, the card's memory over `gpu_share`) reaches every create as
//! the GPU's `memory_cap_bytes`; a bad setting is a 400 naming the field; and a course or an
//! instance asking for GPUs on an image not marked GPU-ready is a 409 naming `image`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::{test, web, App};
use cohort_controller::app::poller;
use cohort_controller::db::models::image::{Image, NewImage};
use cohort_controller::http::api;
use cohort_controller::jobs::worker;
use cohort_e2e::bodies::to_json;
use cohort_e2e::controller::TestController;
use cohort_e2e::gpu_node::GpuNode;
use cohort_e2e::observe::build_fake_nvml;
use cohort_proto::api::gpus::UpdateGpu;
use serde_json::{json, Value};

const GIB: u64 = 1 << 30;

macro_rules! call {
    ($app:expr, $token:expr, $method:expr, $path:expr, $body:expr) => {{
        let mut req = test::TestRequest::default()
            .method($method.parse().unwrap())
            .uri(&format!("/api/v1{}", $path))
            .insert_header(("authorization", format!("Bearer {}", $token)));
        let body: Option<(&str, String)> = $body;
        if let Some((kind, text)) = body {
            req = req.insert_header(("content-type", kind)).set_payload(text);
        }
        let res = test::call_service($app, req.to_request()).await;
        let status = res.status().as_u16();
        let bytes = test::read_body(res).await;
        (
            status,
            serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null),
        )
    }};
}

fn json_body(v: Value) -> Option<(&'static str, String)> {
    Some(("application/json", v.to_string()))
}

#[actix_web::test]
async fn a_sharing_courses_gpu_memory_reaches_the_node_as_each_containers_cap() {
    let _alone = crate::alone().await;
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let node = GpuNode::new(&build_fake_nvml(dir.path()), false);
    let l40s = node
        .gpus
        .gpus
        .iter()
        .find(|g| g.name == "NVIDIA L40S")
        .unwrap();
    let (l40s_uuid, l40s_bytes) = (l40s.uuid.clone(), l40s.memory_total_bytes);
    let t = TestController::with_agents(Arc::new(node.clone()));
    let (_, admin) = t.user("admin", "admin");
    let (_, prof) = t.user("prof", "instructor");
    t.image("base");
    Image::insert(
        &mut t.conn(),
        &NewImage {
            fingerprint: &"c".repeat(64),
            alias: "plain",
            description: "",
            gpu_ready: false,
            size_bytes: 1,
            created_by: None,
        },
    )
    .unwrap();
    t.node("gpu-node", (26300, 26319), 64, 256, true);
    poller::poll_all(&t.ctl).await;
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    let path = format!("/gpus/{l40s_uuid}");
    let (status, body) = call!(
        &app,
        &admin,
        "PATCH",
        &path,
        json_body(to_json(&UpdateGpu { share_limit: 4 }))
    );
    assert_eq!(status, 200, "{body}");
    let course = |code: &str, extra: Value| {
        let mut c = json!({"code": code, "title": "Shared GPUs", "image": "base", "gpus": 1,
                           "gpu_model": "NVIDIA L40S", "gpu_share": 2});
        for (k, v) in extra.as_object().into_iter().flatten() {
            c[k] = v.clone();
        }
        c
    };

    // Refused, naming the field: a cap on a GPU nobody shares, one too small, a non-GPU image.
    for (extra, status_want, field) in [
        (
            json!({"gpu_share": 1, "gpu_memory_mib": 4096}),
            400,
            "gpu_memory_mib",
        ),
        (json!({"gpu_memory_mib": 10}), 400, "gpu_memory_mib"),
        (json!({"image": "plain"}), 409, "image"),
    ] {
        let (status, body) = call!(
            &app,
            &prof,
            "POST",
            "/courses",
            json_body(course("bad", extra.clone()))
        );
        assert_eq!(
            (status, &body["error"]["field"]),
            (status_want, &json!(field)),
            "{extra}: {body}"
        );
    }

    // An instance asking for a GPU on the plain image: the same 409.
    let plain = json!({"name": "lone", "image": "plain", "gpus": 1});
    let (status, body) = call!(&app, &admin, "POST", "/instances", json_body(plain));
    assert_eq!(
        (status, &body["error"]["field"]),
        (409, &json!("image")),
        "{body}"
    );

    // Set: 8 GiB each. Unset: the card's memory over gpu_share 2.
    for (code, extra, student) in [
        ("capped", json!({"gpu_memory_mib": 8192}), "s1"),
        ("even", json!({}), "s2"),
    ] {
        let (status, body) = call!(
            &app,
            &prof,
            "POST",
            "/courses",
            json_body(course(code, extra))
        );
        assert_eq!(status, 201, "{body}");
        if code == "capped" {
            assert_eq!(body["gpu_memory_mib"], json!(8192), "{body}");
        }
        let roster = format!("username,name,email,ssh_key\n{student},{student},,\n");
        let path = format!("/courses/{code}/roster");
        let (status, body) = call!(&app, &prof, "POST", &path, Some(("text/csv", roster)));
        assert_eq!(status, 200, "{body}");
        let path = format!("/courses/{code}/provision");
        let (status, body) = call!(&app, &prof, "POST", &path, None);
        assert_eq!(status, 202, "{body}");
    }
    tokio::spawn(worker::run(t.ctl.clone()));
    let deadline = Instant::now() + Duration::from_secs(60);
    let caps = loop {
        let caps: Vec<(String, Option<u64>)> = node
            .calls()
            .creates
            .iter()
            .map(|c| {
                (
                    c.name.clone(),
                    c.gpus.first().and_then(|g| g.memory_cap_bytes),
                )
            })
            .collect();
        if caps.len() >= 2 || Instant::now() > deadline {
            break caps;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let cap_of = |prefix: &str| {
        caps.iter()
            .find(|(n, _)| n.starts_with(prefix))
            .unwrap_or_else(|| panic!("no create for {prefix}: {caps:?}"))
            .1
    };
    assert_eq!(cap_of("capped-"), Some(8 * GIB), "{caps:?}");
    assert_eq!(cap_of("even-"), Some(l40s_bytes / 2), "{caps:?}");
    eprintln!("gpu memory caps: {:?}", started.elapsed());
}
