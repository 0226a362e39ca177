//! Issue 46's portal in a real browser (headless Chromium over WebDriver) against a real
//! controller and agent on real LXD, in English and both Chinese variants, at a laptop's 1366 and
//! a phone's 390 pixels: every table of the instructor's, the admin's and the student's pages is
//! readable (each cell labelled with its column on a phone, nothing wider than the screen); status
//! words, progress and the audit log are in the page's language; a course whose students wait
//! (their only node cordoned) says why on the course page, and the provision's progress says they wait instead of
//! stopping at "0 / 2 (running)"; the teardown asks for a confirmation, then follows its progress
//! to the final state.

use std::time::{Duration, Instant};

use cohort_e2e::bodies::{course, CreateCourse};
use cohort_e2e::browser::{set_portal_password, Browser};
use cohort_e2e::cluster::Cluster;
use cohort_e2e::PortRange;
use reqwest::Method;
use serde_json::{json, Value};

/// Every table on the page, checked in the page: at a phone's width the head is hidden and each
/// cell shows its column's heading; at a laptop's the head shows and cells carry no label; no
/// cell reaches past the screen's right edge. Returns (tables, cells, problems).
const CHECK_TABLES: &str = r##"
const problems = [];
const narrow = window.innerWidth < 600;
const page = document.documentElement;
if (page.scrollWidth > window.innerWidth + 1)
  problems.push("the page is " + page.scrollWidth + " px wide on a " + window.innerWidth + " px screen");
let tables = 0, cells = 0;
for (const table of document.querySelectorAll("table")) {
  tables++;
  const id = "#" + (table.id || "?");
  if (!table.tHead) { problems.push(id + " has no head"); continue; }
  const heads = Array.from(table.tHead.rows[0].cells).map((c) => c.textContent.trim());
  const headShown = getComputedStyle(table.tHead).display !== "none";
  if (headShown === narrow) problems.push(id + ": head shown = " + headShown);
  for (const body of table.tBodies) for (const row of body.rows) {
    Array.from(row.cells).forEach((cell, i) => {
      cells++;
      // The label shown before the value: the column's heading, on a phone only.
      const before = getComputedStyle(cell, "::before").content;
      const shown = before !== "none" && before !== "normal";
      const labelled = cell.dataset.label === heads[i];
      if (narrow && heads[i] && !(shown && labelled))
        problems.push(id + " row " + row.rowIndex + " cell " + i + ": label " + before + " / " + cell.dataset.label + ", want " + heads[i]);
      if (!narrow && shown)
        problems.push(id + " row " + row.rowIndex + " cell " + i + ": a label on a wide screen: " + before);
      if (cell.getBoundingClientRect().right > window.innerWidth + 1)
        problems.push(id + " row " + row.rowIndex + " cell " + i + " goes past the screen");
    });
  }
}
return {tables, cells, problems};
"##;

/// Checks the current page's tables at both widths; `tables` is how many it must have.
async fn readable(browser: &Browser, what: &str, tables: u64) {
    for (width, height) in [(1366, 900), (390, 844)] {
        browser.viewport(width, height).await;
        let found = browser.run(CHECK_TABLES).await;
        assert_eq!(
            found["problems"],
            json!([]),
            "{what} at {width} px: {found}"
        );
        assert_eq!(found["tables"], tables, "{what} at {width} px: {found}");
        assert!(found["cells"].as_u64() > Some(0), "{what}: {found}");
        browser
            .screenshot(&format!("readable-{what}-{width}"))
            .await;
    }
    browser.viewport(1366, 900).await;
}

/// Waits, up to 60 s, until the progress section's `data-`attribute `key` is non-empty.
async fn progress_says(browser: &Browser, key: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let script = format!("return document.getElementById('progress').dataset.{key} || '';");
        let value = browser.run(&script).await;
        let value = value.as_str().unwrap_or_default().to_string();
        if !value.is_empty() {
            return value;
        }
        assert!(Instant::now() < deadline, "no progress {key} in 60 s");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The English words a Chinese page must not show in its tables' cells and its progress.
const ENGLISH_WORDS: [&str; 8] = [
    "queued",
    "pending",
    "running",
    "stopped",
    "online",
    "success",
    "create",
    "provision",
];

/// Every visible word of the page's table cells and progress section, one per text run.
async fn shown_words(browser: &Browser) -> Vec<String> {
    let v = browser
        .run(
            "return Array.from(document.querySelectorAll('td, #progress'))
               .flatMap((e) => e.innerText.split(/[\\s()·:—]+/)).filter((w) => w);",
        )
        .await;
    serde_json::from_value(v).expect("words")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_portal_is_readable_on_a_phone_and_in_chinese_and_says_why_students_wait() {
    // Three Chromium sessions and a provisioning class: run alone, not beside the `it` tests.
    let _alone = crate::alone().await;
    let cluster = Cluster::start(1).await;
    cluster.import_base_image("cohort/base").await;
    let prof = cluster.user("prof", "instructor").await;
    cluster.user("ann", "student").await;
    let state = cluster.state.path().join("controller");
    for who in ["admin", "prof", "ann"] {
        set_portal_password(
            &cluster.db_url,
            &state,
            who,
            &format!("{who}'s long password"),
        );
    }
    // The only node cordoned: both students wait, and placement says why.
    cluster
        .create_course(
            &prof,
            CreateCourse {
                cpu: Some(1),
                memory_mib: Some(256),
                disk_gib: Some(2),
                ..course("lab1", "Lab", "cohort/base")
            },
        )
        .await;
    cluster
        .admin(Method::POST, "/nodes/node1/cordon", Some(json!({})))
        .await;
    cluster
        .import_roster(
            &prof,
            "lab1",
            "username,name,email,ssh_key\nann,Ann,ann@uni.edu,\nbob,Bob,bob@uni.edu,\n".to_string(),
        )
        .await;
    let op = cluster.start_provision("lab1", &prof).await;
    let waiting = Instant::now();
    loop {
        let ann = cluster
            .admin(Method::GET, "/instances/lab1-ann", None)
            .await;
        if ann["observed_state"] == "queued" && ann["error"].is_string() {
            break;
        }
        assert!(waiting.elapsed() < Duration::from_secs(60), "{ann}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let base = cluster.controller.url();
    let ports = PortRange::claim();

    // (Accept-Language, the queued word, the reason's start, the node's state, the operation's
    // "running" and "pending").
    let languages = [
        (
            "en",
            "queued",
            "no node is online",
            "cordoned",
            "running",
            "pending",
        ),
        (
            "zh-TW",
            "排隊等候中",
            "沒有上線的節點",
            "暫停排程",
            "進行中",
            "等待中",
        ),
        (
            "zh-CN",
            "排队等候中",
            "没有在线的节点",
            "暂停调度",
            "进行中",
            "等待中",
        ),
    ];
    for (i, (language, queued, needs, cordoned, running, pending)) in
        languages.into_iter().enumerate()
    {
        let browser = Browser::start(ports.port(1 + i as u16), language).await;
        browser.sign_in(&base, "prof", "prof's long password").await;

        // The course page: each waiting student says why; the provision's progress says they wait.
        browser
            .goto(&format!("{base}/courses/lab1?operation={op}"))
            .await;
        assert_eq!(progress_says(&browser, "outcome").await, "waiting");
        let outcome = browser.text("#progress-outcome").await;
        assert!(outcome.starts_with(&format!("2 {queued}")), "{outcome}");
        // Running, or handed back to the queue between its rounds: pending.
        let progress = browser.text("#progress-text").await;
        assert!(
            progress == format!("0 / 2 ({running})") || progress == format!("0 / 2 ({pending})"),
            "{language}: {progress}"
        );
        let row = "#students tr[data-username=ann] td.state";
        let cell = browser.text(row).await;
        assert!(cell.starts_with(queued), "{language}: {cell}");
        let reason = browser.text(&format!("{row} .queue-reason")).await;
        assert!(reason.contains(needs), "{language}: {reason}");
        readable(&browser, &format!("course-{language}"), 1).await;
        browser.goto(&format!("{base}/courses")).await;
        readable(&browser, &format!("courses-{language}"), 1).await;
        if language != "en" {
            browser
                .goto(&format!("{base}/courses/lab1?operation={op}"))
                .await;
            progress_says(&browser, "outcome").await;
            let words = shown_words(&browser).await;
            for english in ENGLISH_WORDS {
                assert!(
                    !words.iter().any(|w| w == english),
                    "{language}: {english} in {words:?}"
                );
            }
        }

        // The admin's page: nodes, the queue, users and the audit log.
        browser.goto(&base).await;
        browser.follow(".signout button").await;
        browser
            .sign_in(&base, "admin", "admin's long password")
            .await;
        browser.goto(&format!("{base}/admin")).await;
        let node = browser.text("tr[data-node=node1] td.state").await;
        assert_eq!(node, cordoned);
        let reason = browser
            .text("#queue tr[data-name=lab1-ann] td.reason")
            .await;
        assert!(reason.contains(needs), "{language}: {reason}");
        let imported = browser
            .text("#audit td.action[data-action=import_roster]")
            .await;
        assert!(!imported.is_empty(), "{language}");
        if language != "en" {
            assert!(!imported.is_ascii(), "{language}: {imported}");
            let words = shown_words(&browser).await;
            for english in ENGLISH_WORDS {
                assert!(
                    !words.iter().any(|w| w == english),
                    "{language}: {english} in {words:?}"
                );
            }
        }
        // nodes, queue, users, audit (no GPUs: no GPU table)
        readable(&browser, &format!("admin-{language}"), 4).await;

        // The student's own containers.
        browser.goto(&base).await;
        browser.follow(".signout button").await;
        browser.sign_in(&base, "ann", "ann's long password").await;
        let mine = browser
            .text("#containers tr[data-name=lab1-ann] td.status")
            .await;
        assert!(mine.starts_with(queued), "{language}: {mine}");
        readable(&browser, &format!("containers-{language}"), 1).await;
    }

    // The teardown: without its confirmation nothing happens; with it, the page follows the
    // operation to its end and each row says what its container became.
    let browser = Browser::start(ports.port(9), "en").await;
    browser.sign_in(&base, "prof", "prof's long password").await;
    browser.goto(&format!("{base}/courses/lab1")).await;
    browser
        .run("document.getElementById('teardown-confirm').required = false; return 1;")
        .await;
    browser.click("#teardown input[value=delete]").await;
    browser.follow("#teardown-course").await;
    assert_eq!(
        browser.text("#teardown-error").await,
        "Nothing was torn down: tick the box to confirm."
    );
    let ann: Value = cluster
        .admin(Method::GET, "/instances/lab1-ann", None)
        .await;
    assert_eq!(ann["desired_state"], "running", "{ann}");
    browser.click("#teardown input[value=delete]").await;
    browser.click("#teardown-confirm").await;
    browser.follow("#teardown-course").await;
    assert!(browser.url().await.contains("?operation="));
    let status = progress_says(&browser, "outcome").await;
    assert_eq!(status, "success");
    assert_eq!(browser.text("#progress-text").await, "2 / 2 (success)");
    assert_eq!(browser.text("#progress-outcome").await, "2 deleted");
    for user in ["ann", "bob"] {
        let row = format!("#students tr[data-username={user}] td.state");
        assert_eq!(browser.text(&row).await, "deleted", "{user}");
    }
    browser.screenshot("readable-teardown-en").await;

    // A title of zero-width and BOM characters only is refused at its field, as a blank one is.
    browser.goto(&format!("{base}/courses")).await;
    browser.type_into("#new-code", "zw1").await;
    browser.type_into("#new-title", "\u{200B}\u{FEFF}").await;
    browser.type_into("#new-image", "cohort/base").await;
    browser.follow("#create-course").await;
    let refused = browser.text("#title-error").await;
    assert!(refused.contains("invisible"), "{refused}");
    let courses = cluster.admin(Method::GET, "/courses", None).await;
    assert!(!courses.to_string().contains("zw1"), "{courses}");
}
