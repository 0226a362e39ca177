//! Issue 27's "Create Container" in a real browser (headless Chromium over WebDriver) against a
//! real controller and agent on real LXD: a student sees their allowance, a request over it or
//! with a bad name is refused at its field and makes nothing, a form without the CSRF token is
//! refused, and a container made through the form shows on the containers page queued with the
//! reason the API gives while the only node is cordoned, then running once it is restored. An
//! instructor sets a course's home size on the course page (an out-of-range one refused at the
//! field), as the API then shows it.

use std::time::{Duration, Instant};

use cohort_e2e::bodies::{course, to_json, CreateCourse};
use cohort_e2e::browser::{set_portal_password, Browser};
use cohort_e2e::cluster::Cluster;
use cohort_e2e::PortRange;
use reqwest::{Method, StatusCode};

/// The instances the API lists, by name.
fn set_password(cluster: &Cluster, username: &str, password: &str) {
    let state = cluster.state.path().join("controller");
    set_portal_password(&cluster.db_url, &state, username, password);
}

async fn instance_names(cluster: &Cluster) -> Vec<String> {
    let list = cluster.admin(Method::GET, "/instances", None).await;
    list.as_array()
        .expect("instances")
        .iter()
        .map(|i| i["name"].as_str().expect("name").to_string())
        .collect()
}

/// Fills the create form and submits it.
async fn create(browser: &Browser, fields: [(&str, &str); 4]) {
    for (field, value) in fields {
        browser.type_into(field, value).await;
    }
    browser.follow("#create-container-button").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_student_creates_a_container_and_an_instructor_sets_a_course_limit() {
    let cluster = Cluster::start(1).await;
    cluster.import_base_image("cohort/base").await;
    cluster.user("ann", "student").await;
    cluster.user("prof", "instructor").await;
    set_password(&cluster, "ann", "ann's long password");
    set_password(&cluster, "prof", "prof's long password");
    let base = cluster.controller.url();
    let ports = PortRange::claim();
    let browser = Browser::start(ports.port(1), "en").await;
    browser.sign_in(&base, "ann", "ann's long password").await;

    // The allowance the API enforces is on the page.
    let allowance = browser.text("#allowance").await;
    assert!(
        allowance.contains("4 CPU · 8192 MiB · 50 GiB"),
        "{allowance}"
    );
    assert_eq!(browser.text("#new-image option").await, "cohort/base");

    // Over the allowance, and a bad name: refused at the field, the form kept, nothing made.
    let over = [
        ("#new-name", "ann-big"),
        ("#new-cpu", "5"),
        ("#new-memory_mib", "256"),
        ("#new-disk_gib", "2"),
    ];
    create(&browser, over).await;
    let error = browser.text("#cpu-error").await;
    assert_eq!(error, "5 is over your allowance of 4", "{error}");
    assert_eq!(browser.count("#name-error").await, 0);
    assert_eq!(
        browser
            .run("return document.getElementById('new-cpu').value")
            .await,
        "5"
    );
    let bad_name = [
        ("#new-name", "Ann_Lab"),
        ("#new-cpu", "1"),
        ("#new-memory_mib", "256"),
        ("#new-disk_gib", "2"),
    ];
    create(&browser, bad_name).await;
    assert!(!browser.text("#name-error").await.is_empty());
    assert_eq!(browser.count("#cpu-error").await, 0);
    browser.screenshot("create-container-refused-en").await;
    assert_eq!(browser.count("#no-containers").await, 1);
    assert!(instance_names(&cluster).await.is_empty(), "nothing made");

    // Without the CSRF token: refused, nothing made.
    let body = "name=ann-csrf&image=cohort/base&cpu=1&memory_mib=256&disk_gib=2";
    assert_eq!(browser.post_from_page("/containers", body).await, 403);
    assert!(instance_names(&cluster).await.is_empty(), "nothing made");

    // With its node cordoned, the new container waits, and the page says why as the API does.
    cluster
        .admin(Method::POST, "/nodes/node1/cordon", None)
        .await;
    let good = [
        ("#new-name", "ann-lab"),
        ("#new-cpu", "1"),
        ("#new-memory_mib", "256"),
        ("#new-disk_gib", "2"),
    ];
    create(&browser, good).await;
    assert_eq!(browser.url().await, format!("{base}/"));
    let api = cluster.admin(Method::GET, "/instances/ann-lab", None).await;
    assert_eq!(api["owner"], "ann");
    assert_eq!(api["limits"]["cpu"], 1);
    assert_eq!(api["observed_state"], "queued");
    let reason = api["error"].as_str().expect("a queue reason");
    let reason = reason.strip_prefix("queued:").expect("queued:").trim();
    let row = "#containers tr[data-name=ann-lab]";
    assert!(browser
        .text(&format!("{row} td.status"))
        .await
        .starts_with("queued"));
    assert_eq!(
        browser.text(&format!("{row} .queue-reason")).await,
        format!("Why it waits: {reason}")
    );
    browser.screenshot("create-container-queued-en").await;

    // Restored, the node takes it and the page shows it running.
    cluster
        .admin(Method::POST, "/nodes/node1/restore", None)
        .await;

    // Meanwhile the instructor: a home size out of range is refused at its field and changes
    // nothing; one in range is what the API then shows.
    cluster
        .admin(
            Method::POST,
            "/courses",
            Some(to_json(&CreateCourse {
                instructor: Some("prof".into()),
                ..course("lab1", "Lab", "cohort/base")
            })),
        )
        .await;
    let teacher = Browser::start(ports.port(2), "en").await;
    teacher.sign_in(&base, "prof", "prof's long password").await;
    teacher.goto(&format!("{base}/courses/lab1")).await;
    assert_eq!(teacher.text("#limit-cpu").await, "1");
    assert_eq!(
        teacher
            .post_from_page("/courses/lab1/limits", "home_mib=64")
            .await,
        403
    );
    teacher.type_into("#home_mib", "16").await;
    teacher.follow("#set-limits").await;
    assert!(teacher.text("#home_mib-error").await.contains("32"));
    let course = cluster.admin(Method::GET, "/courses/lab1", None).await;
    assert_eq!(course.get("home_mib"), None, "{course}");
    teacher.type_into("#home_mib", "2048").await;
    teacher.follow("#set-limits").await;
    assert_eq!(teacher.url().await, format!("{base}/courses/lab1"));
    let course = cluster.admin(Method::GET, "/courses/lab1", None).await;
    assert_eq!(course["home_mib"], 2048);
    assert_eq!(
        teacher
            .run("return document.getElementById('home_mib').value")
            .await,
        "2048"
    );
    teacher.screenshot("course-limits-en").await;

    let started = Instant::now();
    loop {
        browser.goto(&format!("{base}/")).await;
        if browser.text(&format!("{row} td.status")).await == "running" {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "ann-lab never ran: {}",
            browser.text(&format!("{row} td.status")).await
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert_eq!(browser.count(&format!("{row} .queue-reason")).await, 0);
    let res = cluster
        .request(Method::GET, "/instances/ann-big", &cluster.admin_token)
        .send()
        .await
        .expect("controller answers");
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
}
