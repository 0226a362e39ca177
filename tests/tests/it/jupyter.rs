//! Issue 28: JupyterLab in the browser behind the portal's sign-in, end to end on a real node
//! network. A student signs in (headless Chromium), opens JupyterLab from her container's page,
//! makes a notebook and runs a cell that prints the container's hostname; the notebook is in her
//! home afterwards (read over SSH). A classmate gets 403 on her JupyterLab, and so does her
//! instructor until the course lets its instructors in; a browser without a session is sent to
//! sign-in and its websocket is refused; JupyterLab's port answers neither another container nor
//! a machine on the host's network. One container per student.
//!
//! Issue 47, items 1, 2 and 14: the notebook is served on its own origin. A page planted on the
//! container's port 8888 by whoever is root there (the instructor against the student, the
//! student against an instructor let in) reaches nothing of the portal: no CSRF token, no key
//! and no token minted in the victim's account, no portal cookie; the container's `Set-Cookie`
//! never reaches the browser and the browser's cookies never reach the container (which gets
//! only the relay's own made-up `_xsrf`, so JupyterLab's XSRF check, kept on in the image, is
//! met for changes the relay took from the notebook's own origin).

use crate::cli_support;
use crate::net_support;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use cli_support::OneNode;
use cohort_e2e::browser::{set_portal_password, Browser};
use cohort_e2e::ssh::SshKey;
use cohort_e2e::{PortRange, TestNetwork};
use net_support::{connect_script, python_in};

/// The Jupyter image's tarball: `images/build jupyter` once (cached by its recipe's hash, like
/// the base image `scripts/setup` builds; a cached recipe is not built again).
pub fn jupyter_tarball() -> PathBuf {
    let cache = std::env::var("COHORT_CACHE_DIR").unwrap_or_else(|_| "/var/cache/cohort".into());
    let build = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../images/build");
    let out = Command::new(build)
        .args(["jupyter", "--cache", &cache])
        .output()
        .expect("run images/build jupyter");
    assert!(
        out.status.success(),
        "images/build jupyter: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    cohort_e2e::images::tarball("jupyter").expect("the jupyter tarball images/build made")
}

/// A `fetch` of `path` from the page, without following redirects: its status (0 for an
/// opaque redirect).
fn set_password(node: &OneNode, username: &str, password: &str) {
    let state = node.controller.state.path();
    set_portal_password(node.controller.db_url(), state, username, password);
}

async fn status_of(browser: &Browser, path: &str) -> u64 {
    let v = browser
        .run_async(&format!(
            "const done = arguments[0];
             fetch('{path}', {{redirect: 'manual'}}).then(r => done(r.status))
               .catch(e => done(String(e)));"
        ))
        .await;
    v.as_u64().unwrap_or_else(|| panic!("fetch {path}: {v}"))
}

/// Waits (bounded) until `$check` is true, polling every half second.
macro_rules! wait_for {
    ($what:expr, $within:expr, $check:expr) => {{
        let deadline = Instant::now() + $within;
        while !$check {
            assert!(
                Instant::now() < deadline,
                "{}: not within {:?}",
                $what,
                $within
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }};
}

// The deployment's helpers block on a runtime of their own: they run before the browser's.
#[test]
fn a_student_runs_a_notebook_through_the_portal_and_no_one_else_gets_in() {
    let tarball = jupyter_tarball();
    let mut net = TestNetwork::claim();
    let lab = net.netns();
    let node = OneNode::start_on(Some(&net));
    let cli = &node.cli;
    cli.ok(&[
        "-q",
        "image",
        "import",
        tarball.to_str().expect("path"),
        "--alias",
        "cohort/jupyter",
        "--jupyter",
    ]);
    // The course's instructor, who gets in only once the course lets instructors in.
    cli.ok(&["user", "create", "prof", "--role", "instructor"]);
    cli.ok(&[
        "course",
        "create",
        "nb1",
        "--instructor",
        "prof",
        "--title",
        "Notebooks",
        "--image",
        "cohort/jupyter",
        "--memory",
        "1GiB",
        "--disk",
        "3GiB",
    ]);
    let (ann_key, bob_key) = (SshKey::generate(), SshKey::generate());
    let dir = tempfile::tempdir().expect("dir");
    let roster = dir.path().join("roster.csv");
    std::fs::write(
        &roster,
        format!(
            "username,name,email,ssh_key\nann,Ann,,{}\nbob,Bob,,{}\n",
            ann_key.public_key(),
            bob_key.public_key()
        ),
    )
    .expect("roster");
    cli.ok(&["course", "roster", "nb1", roster.to_str().expect("path")]);
    cli.ok(&["course", "provision", "nb1", "--wait", "--quiet"]);
    set_password(&node, "ann", "ann's long password");
    set_password(&node, "bob", "bob's long password");
    set_password(&node, "prof", "prof's long password");
    let endpoints = cli.ok(&["course", "endpoints", "nb1"]);
    let endpoint = |user: &str| {
        let row = endpoints
            .lines()
            .find(|l| l.starts_with(&format!("{user},")))
            .unwrap_or_else(|| panic!("{user}'s row in {endpoints}"));
        let f: Vec<&str> = row.split(',').collect();
        (f[3].to_string(), f[4].parse::<u16>().expect("port"))
    };
    let (ann_host, ann_port) = endpoint("ann");

    let base = node.controller.url.clone();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(in_the_browser(
            &node,
            &lab,
            &base,
            &ann_key,
            (&ann_host, ann_port),
        ));
}

/// Everything the browsers do, and the reachability checks.
async fn in_the_browser(
    node: &OneNode,
    lab: &cohort_e2e::network::Netns,
    base: &str,
    ann_key: &SshKey,
    (ann_host, ann_port): (&str, u16),
) {
    let ports = PortRange::claim();
    let browser = Browser::start(ports.port(0), "en").await;

    // Unauthenticated: JupyterLab's pages are sent to sign-in, and its websocket gets no 101.
    browser.goto(&format!("{base}/signin")).await;
    browser.goto(&format!("{base}/jupyter/nb1-ann/lab")).await;
    assert_eq!(browser.url().await, format!("{base}/signin"));
    let ws = browser
        .run_async(
            "const done = arguments[0];
             const ws = new WebSocket('wss://' + location.host + '/jupyter/nb1-ann/api/events/subscribe');
             ws.onopen = () => done('open'); ws.onerror = () => done('refused');",
        )
        .await;
    assert_eq!(ws, "refused", "a websocket without the session");

    // Ann opens JupyterLab from her container's page once it is running: on its own origin.
    let notebook = base.replace("127.0.0.1", "nb1-ann.notebooks.localhost");
    browser.sign_in(base, "ann", "ann's long password").await;
    browser.goto(&format!("{base}/containers/nb1-ann")).await;
    assert_eq!(browser.text("#open-jupyter").await, "Open JupyterLab");
    let opened = Instant::now();
    browser.follow("#open-jupyter").await;
    assert_eq!(
        browser.url().await,
        format!("{notebook}/jupyter/nb1-ann/lab")
    );
    // A new notebook from the launcher, a cell that prints the hostname, run.
    browser
        .click_when_ready(
            ".jp-LauncherCard[data-category='Notebook']",
            Duration::from_secs(90),
        )
        .await;
    // The kernel's state comes over its websocket: "Idle" in the status bar is the kernel
    // ready, and the notebook loaded (keys sent before would be lost).
    wait_for!(
        "the kernel ready",
        Duration::from_secs(90),
        browser
            .run("return document.querySelector('.jp-StatusBar-Component')?.closest('.jp-StatusBar-Widget')?.innerText.includes('| Idle') || document.body.innerText.includes('| Idle');")
            .await
            == true
    );
    eprintln!("Open JupyterLab to kernel ready: {:?}", opened.elapsed());
    browser
        .click_when_ready(".jp-Cell .cm-content", Duration::from_secs(30))
        .await;
    browser
        .keys(
            ".jp-Cell .cm-content",
            "import socket; print('host:' + socket.gethostname())",
        )
        .await;
    assert!(
        browser
            .text(".jp-Cell .cm-content")
            .await
            .contains("gethostname"),
        "the cell holds the code"
    );
    browser
        .click_when_ready(
            "[data-command='notebook:run-cell-and-select-next']",
            Duration::from_secs(30),
        )
        .await;
    // The cell runs once the kernel is ready: the first output is the kernel's start included.
    let deadline = Instant::now() + Duration::from_secs(90);
    while browser.count(".jp-OutputArea-output").await == 0 {
        if Instant::now() > deadline {
            let shot = browser.screenshot("jupyter-no-output").await;
            let log = std::fs::read_to_string(node.controller.state.path().join("serve.log"))
                .unwrap_or_default();
            panic!("no output from the cell in 90 s (see {shot:?}); controller log:\n{log}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!(
        "Open JupyterLab to the first cell's output: {:?}",
        opened.elapsed()
    );
    assert_eq!(browser.text(".jp-OutputArea-output").await, "host:nb1-ann");
    browser
        .click_when_ready("[data-command='docmanager:save']", Duration::from_secs(30))
        .await;
    // A first save of an untitled notebook asks for its name: the one it has.
    browser
        .click_when_ready(".jp-Dialog-button.jp-mod-accept", Duration::from_secs(30))
        .await;
    browser.screenshot("jupyter-notebook-en").await;

    // The notebook is in her home, output and all (read over SSH),
    // and the page knows it is saved: leaving a page with unsaved changes asks first, which
    // would stop the reload below on a busy machine.
    let mut saved;
    wait_for!("the saved notebook", Duration::from_secs(30), {
        let out = ann_key.run_in(&lab.name, ann_host, ann_port, "ann", "cat ~/Untitled.ipynb");
        saved = String::from_utf8_lossy(&out.stdout).into_owned();
        saved.contains("host:nb1-ann")
    });
    assert!(saved.contains("gethostname"), "{saved}");

    wait_for!(
        "the notebook's page clean",
        Duration::from_secs(30),
        browser.count(".jp-mod-dirty").await == 0
    );

    // Issue 43: a reclaim announced while she works in JupyterLab shows over it too, read from
    // the notebook's own origin with her pass (no portal cookie there), linking to her
    // container's page where Keep working is.
    let warn = |statement: &str| {
        use diesel::prelude::*;
        let mut conn = PgConnection::establish(node.controller.db_url()).expect("database");
        diesel::sql_query(statement)
            .execute(&mut conn)
            .expect(statement);
    };
    warn(
        "INSERT INTO reclaim_warnings (instance_id, reason, action, warned_at, due_at)
         SELECT id, 'max_runtime', 'stop', now(), now() + interval '1 hour'
           FROM instances WHERE name = 'nb1-ann'",
    );
    browser
        .goto(&format!("{notebook}/jupyter/nb1-ann/lab"))
        .await;
    wait_for!(
        "the reclaim banner over JupyterLab",
        Duration::from_secs(60),
        browser.count("#cohort-reclaim-warning").await == 1
    );
    let banner = browser.text("#cohort-reclaim-warning").await;
    assert!(
        banner.contains("This container reaches its course's longest run and will be stopped at")
            && banner.contains("Keep working"),
        "{banner}"
    );
    let link = browser
        .run("return document.querySelector('#cohort-reclaim-warning a').href;")
        .await;
    assert_eq!(link, format!("{base}/containers/nb1-ann").as_str());
    let names: Vec<String> = browser
        .cookies()
        .await
        .iter()
        .filter_map(|c| c["name"].as_str().map(String::from))
        .collect();
    assert_eq!(names, ["__Host-cohort_notebook"], "only the pass here");
    warn("DELETE FROM reclaim_warnings");
    browser
        .run("document.getElementById('cohort-reclaim-warning').remove(); return true;")
        .await;

    // Bob, signed in: 403 on her JupyterLab, pages and API alike.
    let bob_browser = Browser::start(ports.port(1), "en").await;
    bob_browser
        .sign_in(base, "bob", "bob's long password")
        .await;
    assert_eq!(status_of(&bob_browser, "/jupyter/nb1-ann/lab").await, 403);
    assert_eq!(
        status_of(&bob_browser, "/jupyter/nb1-ann/api/contents").await,
        403
    );
    // Her own notebook page reaches the same API on its origin (the 403 is about who asks);
    // the portal's origin serves none of it, only the way in.
    assert_eq!(
        status_of(&browser, "/jupyter/nb1-ann/api/contents").await,
        200
    );
    // Bob's browser has no pass for her notebook's origin: a page is sent the portal's way in,
    // which refuses him.
    bob_browser
        .goto(&format!("{notebook}/jupyter/nb1-ann/api/contents"))
        .await;
    assert_eq!(
        bob_browser.url().await,
        format!("{base}/jupyter/nb1-ann/api/contents")
    );

    // Her instructor: refused until the course lets its instructors in, then let in; a
    // classmate stays out either way.
    let prof_browser = Browser::start(ports.port(2), "en").await;
    prof_browser
        .sign_in(base, "prof", "prof's long password")
        .await;
    assert_eq!(
        status_of(&prof_browser, "/jupyter/nb1-ann/api/contents").await,
        403
    );
    node.cli
        .ok(&["course", "set", "nb1", "--jupyter-instructors", "true"]);
    prof_browser
        .goto(&format!("{base}/jupyter/nb1-ann/api/contents"))
        .await;
    assert_eq!(
        prof_browser.url().await,
        format!("{notebook}/jupyter/nb1-ann/api/contents")
    );
    // JupyterLab's listing of her home, her saved notebook in it.
    let listing = prof_browser.run("return document.body.innerText").await;
    assert!(
        listing
            .as_str()
            .unwrap_or_default()
            .contains("Untitled.ipynb"),
        "{listing}"
    );
    assert_eq!(
        status_of(&bob_browser, "/jupyter/nb1-ann/api/contents").await,
        403
    );

    // The port answers in her own container, and neither from Bob's nor from the lab network.
    let ann_ip = String::from_utf8_lossy(
        &ann_key
            .run_in(&lab.name, ann_host, ann_port, "ann", "hostname -I")
            .stdout,
    )
    .trim()
    .to_string();
    assert!(!ann_ip.is_empty(), "ann's address");
    let (ok, why) = python_in(&node.lxd, "nb1-ann", &connect_script(&ann_ip, 8888));
    assert!(ok, "JupyterLab listens in ann's container: {why}");
    let (ok, _) = python_in(&node.lxd, "nb1-bob", &connect_script(&ann_ip, 8888));
    assert!(!ok, "bob's container reached ann's JupyterLab");
    let out = lab.exec("python3", &["-c", &connect_script(&ann_ip, 8888)]);
    assert!(
        !out.status.success(),
        "the lab network reached ann's JupyterLab directly"
    );

    planted_pages_reach_nothing_of_the_portal(node, base, &browser, &prof_browser).await;
}

/// What the planted page tries, in the browser of whoever opens the notebook: read the portal's
/// `/account` for its CSRF token (on the page's own origin and on the portal's), add a key and
/// mint a token with it, read another container's notebook, read the cookies.
const PROBE: &str = r#"<!doctype html><html><head><title>probing</title></head><body><script>
window.addEventListener('load', async () => {
  const out = {};
  const grab = async (url, opts) => {
    try { const r = await fetch(url, opts); return {status: r.status, text: await r.text()}; }
    catch (e) { return {error: String(e)}; }
  };
  const form = {'content-type': 'application/x-www-form-urlencoded'};
  for (const [label, base] of [['here', ''], ['portal', 'PORTAL']]) {
    const page = await grab(base + '/account', {credentials: 'include'});
    const m = (page.text || '').match(/name="csrf" value="([^"]+)"/);
    out[label + '_csrf'] = !!m;
    const csrf = encodeURIComponent(m ? m[1] : '');
    const key = await grab(base + '/account/keys', {method: 'POST', credentials: 'include',
      headers: form, body: 'csrf=' + csrf + '&public_key=' + encodeURIComponent('KEY')});
    out[label + '_key'] = key.status || key.error;
    const token = await grab(base + '/account/tokens', {method: 'POST', credentials: 'include',
      headers: form, body: 'csrf=' + csrf + '&name=planted&expires_in_days=30'});
    out[label + '_token'] = token.status || token.error;
  }
  const other = await grab('OTHER', {credentials: 'include'});
  out.other_notebook = other.status || other.error;
  out.cookies = document.cookie;
  window.cohortProbe = out;
  document.title = 'probed';
});
</script></body></html>"#;

/// The server the container's root puts on port 8888 instead of JupyterLab: the probe for every
/// path, with cookies of its own to plant, and a log of the cookies the browser sent it.
const PLANTED_SERVER: &str = r#"
import http.server, json, sys
page = open('/root/probe.html', 'rb').read()
class Planted(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open('/root/planted.log', 'a') as log:
            log.write(json.dumps({'path': self.path, 'cookie': self.headers.get('Cookie')}) + chr(10))
        self.send_response(200)
        self.send_header('Content-Type', 'text/html')
        self.send_header('Set-Cookie', 'planted=1; Path=/')
        self.send_header('Set-Cookie', '__Host-cohort_session=planted; Path=/; Secure')
        self.send_header('Content-Length', str(len(page)))
        self.end_headers()
        self.wfile.write(page)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(('0.0.0.0', 8888), Planted).serve_forever()
"#;

/// Items 1, 2 and 14: the instructor (root in ann's container) plants a page on its port 8888;
/// ann opens her notebook, and so does her instructor once let in (the student's page against
/// the instructor's session). Neither browser gives the page anything of the portal.
async fn planted_pages_reach_nothing_of_the_portal(
    node: &OneNode,
    base: &str,
    ann: &Browser,
    prof: &Browser,
) {
    use cohort_controller::db::schema::{api_tokens, ssh_keys, users};
    use diesel::prelude::*;
    let planted_key = SshKey::generate().public_key();
    let other =
        base.replace("127.0.0.1", "nb1-bob.notebooks.localhost") + "/jupyter/nb1-bob/api/contents";
    let probe = PROBE
        .replace("PORTAL", base)
        .replace("OTHER", &other)
        .replace("KEY", &planted_key);
    let root = |args: &[&str]| {
        let mut all = vec!["exec", "nb1-ann", "--"];
        all.extend_from_slice(args);
        let out = node.lxd.lxc_output(&all);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    root(&[
        "python3",
        "-c",
        &format!("open('/root/probe.html', 'w').write({probe:?})"),
    ]);
    root(&["systemctl", "stop", "cohort-jupyter"]);
    // Nothing listens on the port (as while JupyterLab starts on a busy node): a page load gets
    // a page saying so that loads itself again, and a request of the page 503 with Retry-After.
    ann.goto(&format!("{base}/jupyter/nb1-ann/lab")).await;
    wait_for!(
        "the page saying JupyterLab is starting",
        Duration::from_secs(30),
        ann.count("#jupyter-starting").await == 1
    );
    assert!(
        ann.text("#jupyter-starting").await.contains("is starting"),
        "{}",
        ann.text("#jupyter-starting").await
    );
    assert_eq!(status_of(ann, "/jupyter/nb1-ann/api/contents").await, 503);
    let retry_after = ann
        .run_async(
            "const done = arguments[0];
             fetch('/jupyter/nb1-ann/api/contents').then(r => done(r.headers.get('retry-after')))
               .catch(e => done(String(e)));",
        )
        .await;
    assert_eq!(retry_after, "3");
    root(&[
        "systemd-run",
        "--unit=planted",
        "python3",
        "-c",
        PLANTED_SERVER,
    ]);
    // Once something answers on the port, the waiting page becomes what it serves by itself.
    wait_for!(
        "the waiting page reloading into what the port serves",
        Duration::from_secs(60),
        matches!(
            ann.run("return document.title").await.as_str(),
            Some("probing" | "probed")
        )
    );
    let notebook = base.replace("127.0.0.1", "nb1-ann.notebooks.localhost");
    for (who, browser) in [("ann", ann), ("prof", prof)] {
        let mut served = false;
        for _ in 0..20 {
            browser.goto(&format!("{base}/jupyter/nb1-ann/lab")).await;
            if browser.run("return document.title").await == "probing"
                || browser.run("return document.title").await == "probed"
            {
                served = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        if !served {
            let status = node.lxd.lxc_output(&[
                "exec", "nb1-ann", "--", "sh", "-c",
                "systemctl status planted cohort-jupyter --no-pager; journalctl -u planted --no-pager | tail -20; ss -ltnp",
            ]);
            panic!(
                "{who}: the planted page was not served; at {} the page says {}; in the container: {}{}",
                browser.url().await,
                browser.run("return document.documentElement.outerHTML.slice(0, 2000)").await,
                String::from_utf8_lossy(&status.stdout),
                String::from_utf8_lossy(&status.stderr)
            );
        }
        assert_eq!(
            browser.url().await,
            format!("{notebook}/jupyter/nb1-ann/lab")
        );
        wait_for!(
            format!("{who}: the probe done"),
            Duration::from_secs(30),
            browser.run("return document.title").await == "probed"
        );
        let out = browser.run("return window.cohortProbe").await;
        eprintln!("{who}'s browser, planted page: {out}");
        assert_eq!(out["here_csrf"], false, "{who}: {out}");
        assert_eq!(out["portal_csrf"], false, "{who}: {out}");
        assert!(
            out["other_notebook"].is_string(),
            "{who}: another notebook read: {out}"
        );
        let cookies = out["cookies"].as_str().unwrap_or_default();
        assert!(
            !cookies.contains("cohort") && !cookies.contains("planted"),
            "{who}: {cookies}"
        );
        // Item 14, apart: the container's Set-Cookie never reached the browser.
        let names: Vec<String> = browser
            .cookies()
            .await
            .iter()
            .filter_map(|c| c["name"].as_str().map(String::from))
            .collect();
        assert_eq!(
            names,
            ["__Host-cohort_notebook"],
            "{who}: the notebook origin's cookies"
        );
    }
    let mut conn = PgConnection::establish(node.controller.db_url()).expect("database");
    let keys: Vec<String> = ssh_keys::table
        .select(ssh_keys::public_key)
        .load(&mut conn)
        .expect("keys");
    assert!(
        !keys.iter().any(|k| k.trim() == planted_key.trim()),
        "the planted key landed on an account"
    );
    let tokens: Vec<(String, Option<String>)> = api_tokens::table
        .inner_join(users::table)
        .select((users::username, api_tokens::name))
        .load(&mut conn)
        .expect("tokens");
    assert!(
        !tokens
            .iter()
            .any(|(_, name)| name.as_deref() == Some("planted")),
        "a token was minted by the planted page: {tokens:?}"
    );
    // The browser's cookies never reached the container: all it was sent is the relay's own
    // made-up `_xsrf` (JupyterLab's XSRF pair).
    let seen = root(&["cat", "/root/planted.log"]);
    assert!(seen.lines().count() >= 2, "{seen}");
    let relays_own = |line: &str| {
        let v: serde_json::Value = serde_json::from_str(line).unwrap_or_default();
        v["cookie"].as_str().is_some_and(|c| {
            c.strip_prefix("_xsrf=")
                .is_some_and(|t| t.len() == 32 && t.bytes().all(|b| b.is_ascii_hexdigit()))
        })
    };
    assert!(
        seen.lines().all(relays_own),
        "the browser's cookies reached the container: {seen}"
    );
}
