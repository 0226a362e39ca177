//! Issue 27's portal in a real browser (headless Chromium over WebDriver) against a real
//! `cohort-controller serve` over HTTPS: sign-in in the browser's language and switching it,
//! session cookies' flags, expiry and sign-out, a form without its CSRF token refused, failed
//! sign-ins audited and limited per source.

use std::process::Command;

use cohort_controller::db::schema::{audit_log, portal_sessions};
use cohort_e2e::bodies::{new_user, to_json, Role};
use cohort_e2e::browser::{set_portal_password, Browser};
use cohort_e2e::cluster::Cluster;
use cohort_e2e::PortRange;
use diesel::prelude::*;
use serde_json::Value;

fn failed_sign_ins(conn: &mut PgConnection, username: &str) -> i64 {
    audit_log::table
        .filter(audit_log::action.eq("failed_sign_in"))
        .filter(audit_log::detail.retrieve_as_text("username").eq(username))
        .count()
        .get_result(conn)
        .expect("audit count")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_sessions_languages_csrf_and_failed_sign_ins() {
    let cluster = Cluster::start_with_env(0, &[("COHORT_AUTH_FAILURES_PER_MINUTE", "3")]).await;
    let ports = PortRange::claim();
    let base = cluster.controller.url();
    let _: Value = cluster
        .call(
            &cluster.admin_token,
            reqwest::Method::POST,
            "/users",
            Some(to_json(&new_user("mei", Role::Student))),
        )
        .await;
    set_portal_password(
        &cluster.db_url,
        &cluster.controller_dir(),
        "mei",
        "plum blossom 42",
    );
    let mut conn = PgConnection::establish(&cluster.db_url).expect("connect");

    // A browser that asks for Traditional Chinese gets it; the switcher changes it.
    let browser = Browser::start(ports.port(1), "zh-TW").await;
    browser.goto(&format!("{base}/")).await;
    assert_eq!(
        browser.url().await,
        format!("{base}/signin"),
        "not signed in yet"
    );
    assert_eq!(browser.text("h1").await, "登入");
    browser.screenshot("signin-zh-hant").await;
    browser.follow("a[hreflang=zh-Hans]").await;
    assert_eq!(browser.text("h1").await, "登录");
    browser.follow("a[hreflang=en]").await;
    assert_eq!(browser.text("h1").await, "Sign in");
    assert_eq!(browser.url().await, format!("{base}/signin"));

    // A wrong password is shown as such, counted and audited.
    browser.sign_in(&base, "mei", "plum blossom 41").await;
    assert_eq!(
        browser.text("#signin-error").await,
        "Wrong username or password."
    );
    assert_eq!(failed_sign_ins(&mut conn, "mei"), 1);

    // The right one signs in; the session cookie is Secure, HttpOnly, SameSite=Strict, expires.
    browser.sign_in(&base, "mei", "plum blossom 42").await;
    assert_eq!(browser.url().await, format!("{base}/"));
    assert_eq!(browser.text("#whoami").await, "mei");
    assert_eq!(browser.text("h1").await, "My containers");
    assert!(browser.count("#no-containers").await == 1);
    browser.screenshot("home-en").await;
    let cookies = browser.cookies().await;
    let session = cookies
        .iter()
        .find(|c| c["name"] == "__Host-cohort_session")
        .unwrap_or_else(|| panic!("no session cookie: {cookies:?}"));
    assert_eq!(session["secure"], true, "{session}");
    assert_eq!(session["httpOnly"], true, "{session}");
    assert_eq!(session["sameSite"], "Strict", "{session}");
    assert!(session["expiry"].as_u64().is_some(), "{session}");
    let secret = session["value"].as_str().expect("cookie value");
    let stored: Vec<Vec<u8>> = portal_sessions::table
        .select(portal_sessions::secret_hash)
        .load(&mut conn)
        .expect("sessions");
    assert_eq!(
        stored,
        [cohort_controller::accounts::auth::sha256(secret)],
        "only the hash is kept"
    );

    // A form posted without the session's CSRF token, or with a wrong one, is refused (403) and
    // changes nothing: the session is still there.
    assert_eq!(browser.post_from_page("/signout", "").await, 403);
    assert_eq!(
        browser
            .post_from_page("/signout", "csrf=0123456789abcdef")
            .await,
        403
    );
    browser.goto(&format!("{base}/")).await;
    assert_eq!(browser.text("#whoami").await, "mei", "still signed in");

    // An expired session is no session.
    diesel::update(portal_sessions::table)
        .set(portal_sessions::expires_at.eq(chrono::Utc::now() - chrono::Duration::seconds(1)))
        .execute(&mut conn)
        .expect("expire");
    browser.goto(&format!("{base}/")).await;
    assert_eq!(browser.url().await, format!("{base}/signin"));

    // Signing out (the real button, with its token) ends the session in the database too.
    browser.sign_in(&base, "mei", "plum blossom 42").await;
    assert_eq!(browser.text("#whoami").await, "mei");
    browser.follow(".signout button").await;
    assert_eq!(browser.url().await, format!("{base}/signin"));
    let live: i64 = portal_sessions::table
        .filter(portal_sessions::expires_at.gt(diesel::dsl::now))
        .count()
        .get_result(&mut conn)
        .expect("count");
    assert_eq!(live, 0, "the session row is gone");
    browser.goto(&format!("{base}/")).await;
    assert_eq!(browser.url().await, format!("{base}/signin"));

    // Two more failures make three this minute: even the right password is refused now.
    browser.sign_in(&base, "mei", "wrong one 1").await;
    browser.sign_in(&base, "mei", "wrong one 2").await;
    assert_eq!(failed_sign_ins(&mut conn, "mei"), 3);
    browser.sign_in(&base, "mei", "plum blossom 42").await;
    assert_eq!(
        browser.text("#signin-error").await,
        "Too many failed sign-ins from this address. Try again in a minute."
    );
    assert_eq!(browser.url().await, format!("{base}/signin"));
    browser.screenshot("signin-throttled").await;
}

/// An instructor imports a roster in the browser (a bad row refused by its number, nothing
/// imported), provisions and watches every row turn ready, and downloads known_hosts. A student
/// signs in, reads their container's ssh command and host-key line from its page, and
/// that exact command (with their key, and only the page's host key trusted) logs in; a
/// classmate's container by URL is a 403 page; a state change without the CSRF token is refused
/// and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_student_logs_in_with_the_ssh_command_the_portal_shows() {
    use cohort_e2e::ssh::SshKey;

    let cluster = Cluster::start(1).await;
    cluster.import_base_image("cohort/base").await;
    cluster.user("prof", "instructor").await;
    let (ann_key, bob_key) = (SshKey::generate(), SshKey::generate());
    let controller_state = cluster.state.path().join("controller");
    set_portal_password(
        &cluster.db_url,
        &controller_state,
        "prof",
        "prof's long password",
    );
    let ports = PortRange::claim();
    let base = cluster.controller.url();

    // The instructor: a roster with a bad row is refused with its row number, nothing imported.
    let teacher_browser = Browser::start(ports.port(1), "en").await;
    teacher_browser
        .sign_in(&base, "prof", "prof's long password")
        .await;
    teacher_browser.follow("#courses-link").await;
    let create = [
        ("#new-title", "Portal"),
        ("#new-image", "cohort/base"),
        ("#new-cpu", "1"),
        ("#new-memory_mib", "256"),
        ("#new-disk_gib", "2"),
    ];
    teacher_browser.type_into("#new-code", "Web 1!").await;
    for (field, value) in create {
        teacher_browser.type_into(field, value).await;
    }
    teacher_browser.follow("#create-course").await;
    assert!(!teacher_browser.text("#code-error").await.is_empty());
    assert_eq!(
        teacher_browser.count("#no-courses").await,
        1,
        "nothing made"
    );
    teacher_browser.type_into("#new-code", "web1").await;
    for (field, value) in create {
        teacher_browser.type_into(field, value).await;
    }
    teacher_browser.follow("#create-course").await;
    assert_eq!(teacher_browser.url().await, format!("{base}/courses/web1"));
    let good = format!(
        "username,name,email,ssh_key\nann,Ann,ann@uni.edu,{}\nbob,Bob,bob@uni.edu,{}\n",
        ann_key.public_key(),
        bob_key.public_key()
    );
    let bad = good.replace(&bob_key.public_key(), "ssh-ed25519 broken");
    teacher_browser.type_into("#roster", &bad).await;
    teacher_browser.follow("#import-roster").await;
    let error = teacher_browser.text("#roster-error").await;
    assert!(error.contains("row 3"), "{error}");
    assert_eq!(
        teacher_browser.count("#students tbody tr").await,
        0,
        "nothing imported"
    );
    teacher_browser.screenshot("roster-error-en").await;
    teacher_browser.type_into("#roster", &good).await;
    teacher_browser.follow("#import-roster").await;
    assert_eq!(teacher_browser.count("#students tbody tr").await, 2);

    // Provisioning: the bar fills and every row turns ready.
    teacher_browser.follow("#provision").await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    loop {
        let status = teacher_browser
            .run("return document.getElementById('progress').dataset.status || '';")
            .await;
        if status == "success" {
            break;
        }
        assert!(
            status != "failure" && std::time::Instant::now() < deadline,
            "provisioning: {status}\n{}",
            cluster.controller_log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    for user in ["ann", "bob"] {
        let state = teacher_browser
            .text(&format!("#students tr[data-username={user}] td.state"))
            .await;
        assert_eq!(state, "ready", "{user}");
    }
    assert_eq!(
        teacher_browser.text("#progress-text").await,
        "2 / 2 (success)"
    );
    teacher_browser.screenshot("course-provisioned-en").await;
    // A per-student action from the class table goes through the course's student action.
    teacher_browser
        .follow("#students tr[data-username=bob] button[data-action=stop]")
        .await;
    let bob = cluster
        .admin(reqwest::Method::GET, "/instances/web1-bob", None)
        .await;
    assert_eq!(bob["desired_state"], "stopped", "{bob}");
    // Bob's page: a snapshot taken and restored from it, the reset's warning says what is kept.
    teacher_browser
        .follow("#students tr[data-username=bob] a.manage")
        .await;
    let bob_page = format!("{base}/courses/web1/students/bob");
    assert_eq!(teacher_browser.url().await, bob_page);
    assert_eq!(teacher_browser.count("#no-snapshots").await, 1);
    assert!(teacher_browser
        .text("#reset-warning")
        .await
        .contains("the home directory is kept"));
    teacher_browser.type_into("#snapshot-name", "before").await;
    teacher_browser.follow("#take-snapshot").await;
    assert_eq!(teacher_browser.url().await, bob_page);
    assert_eq!(
        teacher_browser
            .count("#snapshots li[data-snapshot=before]")
            .await,
        1
    );
    teacher_browser
        .follow("#snapshots li[data-snapshot=before] button[data-action=restore]")
        .await;
    let restored_at = teacher_browser.url().await;
    assert_eq!(
        restored_at,
        bob_page,
        "restored, back on the page: {}\n{}",
        teacher_browser.text("body").await,
        cluster.controller_log()
    );
    assert_eq!(teacher_browser.count("main .error").await, 0);
    let restored: i64 = {
        let mut conn = PgConnection::establish(&cluster.db_url).expect("db");
        audit_log::table
            .filter(audit_log::action.eq("restore_snapshot"))
            .filter(audit_log::object.eq("web1-bob"))
            .count()
            .get_result(&mut conn)
            .expect("audit")
    };
    assert_eq!(restored, 1, "the restore went through the instance action");
    teacher_browser.screenshot("student-snapshots-en").await;
    teacher_browser.goto(&format!("{base}/courses/web1")).await;
    let known_hosts = teacher_browser
        .run_async(
            "const done = arguments[0];
             fetch('/courses/web1/endpoints/known-hosts').then(r => r.text()).then(done);",
        )
        .await;
    let known_hosts = known_hosts.as_str().unwrap_or_default().to_string();
    assert_eq!(known_hosts.lines().count(), 2, "{known_hosts}");
    set_portal_password(
        &cluster.db_url,
        &controller_state,
        "ann",
        "ann's long password",
    );
    let browser = Browser::start(ports.port(0), "en").await;
    browser.sign_in(&base, "ann", "ann's long password").await;
    assert_eq!(
        browser
            .text("#containers tr[data-name=web1-ann] .status")
            .await,
        "running"
    );
    assert_eq!(
        browser.count("#containers tbody tr").await,
        1,
        "only her own"
    );
    browser
        .follow("#containers a[href='/containers/web1-ann']")
        .await;
    let command = browser.text("#ssh-command").await;
    let known_hosts = browser.text("#known-hosts").await;
    browser.click("button[data-copy=ssh-command]").await;
    browser.screenshot("container-en").await;
    assert!(
        command.starts_with("ssh -p ") && command.ends_with(" ann@127.0.0.1"),
        "{command}"
    );

    // The command as shown, given her key and trusting only the host key the page showed.
    let trusted = tempfile::NamedTempFile::new().expect("known_hosts");
    std::fs::write(trusted.path(), format!("{known_hosts}\n")).expect("write known_hosts");
    let with_identity = command.replacen(
        "ssh ",
        &format!(
            "ssh -i {} -o BatchMode=yes -o IdentitiesOnly=yes -o StrictHostKeyChecking=yes \
             -o UserKnownHostsFile={} -o ConnectTimeout=10 ",
            ann_key.private_key().display(),
            trusted.path().display()
        ),
        1,
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let out = loop {
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("{with_identity} whoami"))
            .output()
            .expect("run ssh");
        if out.status.success() || std::time::Instant::now() > deadline {
            break out;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    };
    assert!(
        out.status.success(),
        "{with_identity}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ann\n");

    // Bob's container by URL: the 403 page, in the page and in its status.
    browser.goto(&format!("{base}/containers/web1-bob")).await;
    assert_eq!(
        browser.text("main .error").await,
        "You may not see this page."
    );
    browser.screenshot("forbidden-en").await;
    let status = browser
        .run_async(
            "const done = arguments[0];
             fetch('/containers/web1-bob').then(r => done(r.status)).catch(e => done(String(e)));",
        )
        .await;
    assert_eq!(status, 403);

    // Stopping her container without the form's token is refused; it stays wanted running.
    browser.goto(&format!("{base}/containers/web1-ann")).await;
    let status = browser
        .run_async(
            "const done = arguments[0];
             fetch('/containers/web1-ann/state', {method: 'POST', redirect: 'manual',
                 headers: {'Content-Type': 'application/x-www-form-urlencoded'},
                 body: 'action=stop'}).then(r => done(r.status)).catch(e => done(String(e)));",
        )
        .await;
    assert_eq!(status, 403);
    let ann = cluster
        .admin(reqwest::Method::GET, "/instances/web1-ann", None)
        .await;
    assert_eq!(ann["desired_state"], "running", "{ann}");

    // The instructor's forms are not hers, even with her own valid token (403, nothing done);
    // the instructor's own teardown without the token is refused too; with it, all stop.
    for path in [
        "/courses/web1/students/bob/snapshots",
        "/courses/web1/teardown",
    ] {
        let status = browser
            .run_async(&format!(
                "const done = arguments[0];
                 const csrf = document.querySelector('input[name=csrf]').value;
                 fetch('{path}', {{method: 'POST', redirect: 'manual',
                     headers: {{'Content-Type': 'application/x-www-form-urlencoded'}},
                     body: 'csrf=' + csrf}}).then(r => done(r.status)).catch(e => done(String(e)));"
            ))
            .await;
        assert_eq!(status, 403, "{path}");
    }
    let status = teacher_browser
        .run_async(
            "const done = arguments[0];
             fetch('/courses/web1/teardown', {method: 'POST', redirect: 'manual',
                 headers: {'Content-Type': 'application/x-www-form-urlencoded'},
                 body: 'mode=stop'}).then(r => done(r.status)).catch(e => done(String(e)));",
        )
        .await;
    assert_eq!(status, 403);
    let ann = cluster
        .admin(reqwest::Method::GET, "/instances/web1-ann", None)
        .await;
    assert_eq!(ann["desired_state"], "running", "{ann}");
    // The teardown asks for a confirmation, then follows its progress on the course page.
    teacher_browser.click("#teardown-confirm").await;
    teacher_browser.follow("#teardown-course").await;
    assert!(teacher_browser
        .url()
        .await
        .starts_with(&format!("{base}/courses/web1?operation=")));
    let ann = cluster
        .admin(reqwest::Method::GET, "/instances/web1-ann", None)
        .await;
    assert_eq!(ann["desired_state"], "stopped", "torn down: {ann}");
}

/// A student's own account page: a bad SSH key is refused next to its field and nothing is
/// added, a good one is listed by fingerprint and removed; a password change needs the current
/// password and a long enough new one, ends the other sessions, and the new password is the one
/// that signs in. The admin page is refused to her and shows the admin the filtered audit log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_student_manages_their_keys_and_password() {
    use cohort_e2e::ssh::SshKey;

    let cluster = Cluster::start(0).await;
    let ports = PortRange::claim();
    let base = cluster.controller.url();
    let _: Value = cluster
        .call(
            &cluster.admin_token,
            reqwest::Method::POST,
            "/users",
            Some(to_json(&new_user("lin", Role::Student))),
        )
        .await;
    set_portal_password(
        &cluster.db_url,
        &cluster.controller_dir(),
        "lin",
        "first password",
    );
    let mut conn = PgConnection::establish(&cluster.db_url).expect("connect");
    let browser = Browser::start(ports.port(1), "zh-CN").await;
    let other = Browser::start(ports.port(2), "en").await;
    other.sign_in(&base, "lin", "first password").await;
    assert_eq!(other.text("#whoami").await, "lin");
    browser.sign_in(&base, "lin", "first password").await;
    browser.follow("#account-link").await;
    assert_eq!(browser.text("h1").await, "我的账号");
    browser.follow("a[hreflang=en]").await;

    browser
        .type_into("#public_key", "ssh-ed25519 not-base64 x")
        .await;
    browser.follow("#add-key").await;
    assert!(!browser.text("#public_key-error").await.is_empty());
    assert_eq!(browser.count("#no-keys").await, 1, "nothing was added");
    let key = SshKey::generate();
    browser.type_into("#public_key", &key.public_key()).await;
    browser.follow("#add-key").await;
    assert_eq!(browser.count("#keys li").await, 1);
    let fingerprint = browser.text("#keys li code").await;
    assert!(fingerprint.starts_with("SHA256:"), "{fingerprint}");
    let keys: i64 = cohort_controller::db::schema::ssh_keys::table
        .count()
        .get_result(&mut conn)
        .expect("keys");
    assert_eq!(keys, 1, "the same key store as /api/v1/me/ssh-keys");
    browser.screenshot("account-en").await;
    browser.follow("#keys li button").await;
    assert_eq!(browser.count("#no-keys").await, 1, "removed");

    browser
        .type_into("#current_password", "not my password")
        .await;
    browser.type_into("#new_password", "second password").await;
    browser.follow("#change-password").await;
    assert_eq!(
        browser.text("#current_password-error").await,
        "that is not your current password"
    );
    browser
        .type_into("#current_password", "first password")
        .await;
    browser.type_into("#new_password", "short").await;
    browser
        .run("document.getElementById('new_password').removeAttribute('minlength'); return 1;")
        .await;
    browser.follow("#change-password").await;
    assert!(browser
        .text("#new_password-error")
        .await
        .contains("at least 10"));
    browser
        .type_into("#current_password", "first password")
        .await;
    browser.type_into("#new_password", "second password").await;
    browser.follow("#change-password").await;
    assert_eq!(browser.url().await, format!("{base}/account"));
    let live: i64 = portal_sessions::table
        .count()
        .get_result(&mut conn)
        .expect("count");
    assert_eq!(live, 1, "the other browser's session ended");
    other.goto(&format!("{base}/")).await;
    assert_eq!(other.url().await, format!("{base}/signin"));
    other.sign_in(&base, "lin", "first password").await;
    assert_eq!(
        other.text("#signin-error").await,
        "Wrong username or password."
    );
    other.sign_in(&base, "lin", "second password").await;
    assert_eq!(other.text("#whoami").await, "lin");

    // The admin page is the admin's: a student gets the 403 page; the admin sees the nodes and
    // the audit log, filtered.
    browser.goto(&format!("{base}/admin")).await;
    assert_eq!(
        browser.text("main .error").await,
        "You may not see this page."
    );
    assert_eq!(browser.count("#admin-link").await, 0);
    set_portal_password(
        &cluster.db_url,
        &cluster.controller_dir(),
        "admin",
        "the admin's password",
    );
    other.follow(".signout button").await;
    other.sign_in(&base, "admin", "the admin's password").await;
    other.follow("#admin-link").await;
    assert_eq!(other.count("#nodes").await, 1);
    other.type_into("#filter-action", "change_password").await;
    other.follow("#filter").await;
    assert_eq!(other.count("#audit tbody tr").await, 1);
    assert_eq!(other.text("#audit tbody td.actor").await, "lin");
    other.screenshot("admin-en").await;
}

/// The signed-in user's API tokens page: a lifetime out of range is refused at its field and
/// makes nothing; a token made there is shown once, works on the API as its owner, is listed by
/// name (never its secret) and, revoked there, is refused (401); a form without the CSRF token
/// makes none.
async fn api_tokens_from_the_portal(browser: &Browser, base: &str, cluster: &Cluster) {
    let post = |body: &str| {
        format!(
            "const done = arguments[0];
             const csrf = document.querySelector('input[name=csrf]').value;
             fetch('/account/tokens', {{method: 'POST', redirect: 'manual',
                 headers: {{'Content-Type': 'application/x-www-form-urlencoded'}},
                 body: {body}}})
               .then(r => done(r.status)).catch(e => done(String(e)));"
        )
    };
    browser.goto(&format!("{base}/account")).await;
    browser.follow("#tokens-link").await;
    assert_eq!(browser.count("#no-tokens").await, 1);
    let status = browser
        .run_async(&post("'name=x&expires_in_days=100'"))
        .await;
    assert_eq!(status, 403, "no CSRF token, no API token");
    let status = browser
        .run_async(&post("'csrf=' + csrf + '&name=x&expires_in_days=100000'"))
        .await;
    assert_eq!(status, 400);
    browser.goto(&format!("{base}/account/tokens")).await;
    assert_eq!(browser.count("#no-tokens").await, 1, "nothing made");

    browser.type_into("#token-name", "laptop").await;
    browser.type_into("#token-days", "30").await;
    browser.follow("#create-token").await;
    let token = browser.text("#new-token-secret").await;
    assert_eq!(browser.text("#tokens tbody tr .name").await, "laptop");
    let me: Value = cluster
        .call(&token, reqwest::Method::GET, "/me", None)
        .await;
    assert_eq!(me["user"]["username"], "chen", "{me}");
    let expires = browser.text("#tokens tbody tr .expires").await;
    let in_30_days = (chrono::Utc::now() + chrono::Duration::days(30)).format("%Y-%m-%d");
    assert!(expires.starts_with(&in_30_days.to_string()), "{expires}");
    browser.screenshot("tokens-en").await;

    // Shown once: the page again has the row, not the secret.
    browser.goto(&format!("{base}/account/tokens")).await;
    assert_eq!(browser.count("#new-token-secret").await, 0);
    assert!(!browser
        .run("return document.body.innerHTML;")
        .await
        .to_string()
        .contains(&token));
    browser.follow("#tokens tbody tr button").await;
    assert_eq!(browser.count("#no-tokens").await, 1);
    let status = cluster
        .request(reqwest::Method::GET, "/me", &token)
        .send()
        .await
        .expect("call with the revoked token")
        .status();
    assert_eq!(status, 401, "a revoked token is refused");
}

/// Issue 27's directory sign-in against a real slapd (ldaps, a service account that searches,
/// a group for instructors): a directory instructor signs in with their university password and
/// gets the instructor's pages, a directory student the student's; a wrong password, an unknown
/// user, an empty password (an unauthenticated bind a directory would accept) and a filter
/// injection all get the same message; the password never reaches the controller's log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directory_users_sign_in_with_their_university_password() {
    use cohort_e2e::ldap::{Person, Slapd};

    let ports = PortRange::claim();
    let slapd = Slapd::start(
        ports.port(2),
        &[
            Person {
                uid: "lin",
                name: "Lin Wei",
                password: "lin's directory password",
                instructor: true,
            },
            Person {
                uid: "chen",
                name: "Chen Yu",
                password: "chen's directory password",
                instructor: false,
            },
        ],
    );
    let env = slapd.controller_env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let cluster = Cluster::start_with_env(0, &env).await;
    let base = cluster.controller.url();
    let mut conn = PgConnection::establish(&cluster.db_url).expect("connect");
    let browser = Browser::start(ports.port(1), "en").await;

    for (username, password) in [
        ("lin", "lin's directory passworD"),
        ("nobody", "lin's directory password"),
        ("lin)(uid=*", "lin's directory password"),
    ] {
        browser.sign_in(&base, username, password).await;
        assert_eq!(
            browser.text("#signin-error").await,
            "Wrong username or password.",
            "{username}\n{}",
            slapd.log()
        );
        assert_eq!(browser.url().await, format!("{base}/signin"));
    }
    // An empty password, posted with the form's own token (the page's `required` aside).
    browser.goto(&format!("{base}/signin")).await;
    let status = browser
        .run_async(
            "const done = arguments[0];
             const csrf = document.querySelector('input[name=csrf]').value;
             fetch('/signin', {method: 'POST', redirect: 'manual',
                 headers: {'Content-Type': 'application/x-www-form-urlencoded'},
                 body: 'csrf=' + csrf + '&username=lin&password='})
               .then(r => done(r.status)).catch(e => done(String(e)));",
        )
        .await;
    assert_eq!(status, 401, "an empty password is no sign-in");
    assert_eq!(failed_sign_ins(&mut conn, "lin"), 2);

    // The instructor: made on first sign-in, with the group's role and the directory's name.
    browser
        .sign_in(&base, "lin", "lin's directory password")
        .await;
    assert_eq!(browser.url().await, format!("{base}/"), "{}", slapd.log());
    assert_eq!(browser.text("#whoami").await, "lin");
    browser.follow("#courses-link").await;
    assert_eq!(browser.url().await, format!("{base}/courses"));
    let (role, full_name): (String, Option<String>) = cohort_controller::db::schema::users::table
        .filter(cohort_controller::db::schema::users::username.eq("lin"))
        .select((
            cohort_controller::db::schema::users::role,
            cohort_controller::db::schema::users::full_name,
        ))
        .get_result(&mut conn)
        .expect("lin");
    assert_eq!(
        (role.as_str(), full_name.as_deref()),
        ("instructor", Some("Lin Wei"))
    );
    browser.follow(".signout button").await;

    // The student: not in the group, so a student; courses are not theirs to see.
    browser
        .sign_in(&base, "chen", "chen's directory password")
        .await;
    assert_eq!(browser.text("#whoami").await, "chen");
    assert_eq!(browser.text("h1").await, "My containers");
    assert_eq!(browser.count("#courses-link").await, 0);
    browser.screenshot("home-directory-student-en").await;
    api_tokens_from_the_portal(&browser, &base, &cluster).await;

    let log =
        std::fs::read_to_string(cluster.controller_dir().join("controller.log")).expect("log");
    assert!(!log.contains("directory password"), "a password was logged");
}
