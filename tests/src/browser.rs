//! A real browser for the portal's tests: headless Chromium driven over WebDriver by Debian's
//! `chromedriver`, which the test starts on 127.0.0.1 itself and stops on drop. Plain WebDriver
//! HTTP (W3C) over reqwest: the dozen commands the tests use, no client library.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The W3C key of an element reference in a WebDriver answer.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

pub struct Browser {
    driver: Child,
    http: reqwest::Client,
    /// `http://127.0.0.1:PORT/session/ID`.
    session: String,
    /// Where screenshots go: `target/portal-screenshots`.
    shots: PathBuf,
}

/// An element found on the page.
#[derive(Debug, Clone)]
pub struct Element(String);

impl Browser {
    /// Starts chromedriver on `port` and a headless Chromium whose `Accept-Language` is
    /// `accept_language`; it trusts the controller's self-signed certificate
    /// (`acceptInsecureCerts`), the one thing a student would click through once.
    pub async fn start(port: u16, accept_language: &str) -> Browser {
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .arg("--allowed-ips=127.0.0.1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver (chromium-driver; run scripts/setup)");
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(90))
            .build()
            .expect("http client");
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let ready = http.get(format!("{base}/status")).send().await;
            if let Ok(resp) = ready {
                let status: Value = resp.json().await.unwrap_or(Value::Null);
                if status["value"]["ready"] == true {
                    break;
                }
            }
            assert!(
                Instant::now() < deadline,
                "chromedriver did not start in 20 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "acceptInsecureCerts": true,
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1100,800",
                         format!("--lang={accept_language}")],
                "prefs": {"intl.accept_languages": accept_language},
            },
        }}});
        let resp: Value = http
            .post(format!("{base}/session"))
            .json(&caps)
            .send()
            .await
            .expect("new WebDriver session")
            .json()
            .await
            .expect("new session answer");
        let id = resp["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {resp}"))
            .to_string();
        let shots = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../target/portal-screenshots")
            .to_path_buf();
        std::fs::create_dir_all(&shots).expect("screenshot dir");
        let browser = Browser {
            driver,
            http,
            session: format!("{base}/session/{id}"),
            shots,
        };
        // Elements are looked for up to 10 s, as a page may still be loading.
        browser
            .command(
                reqwest::Method::POST,
                "/timeouts",
                Some(json!({"implicit": 10_000, "pageLoad": 60_000, "script": 30_000})),
            )
            .await;
        browser
    }

    async fn command(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        self.try_command(method.clone(), path, body)
            .await
            .unwrap_or_else(|e| panic!("WebDriver {method} {path}: {e}"))
    }

    /// A WebDriver command; its error (as WebDriver words it) instead of a panic.
    async fn try_command(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, Value> {
        let mut req = self
            .http
            .request(method.clone(), format!("{}{path}", self.session));
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp: Value = req
            .send()
            .await
            .unwrap_or_else(|e| panic!("WebDriver {method} {path}: {e}"))
            .json()
            .await
            .unwrap_or_else(|e| panic!("WebDriver {method} {path}: {e}"));
        if resp["value"]["error"].is_string() {
            return Err(resp["value"].clone());
        }
        Ok(resp["value"].clone())
    }

    /// Clicks the first element matching `css` once there is one that takes the click, trying
    /// for up to `within` (a page that renders late or redraws what was found: JupyterLab on a
    /// busy machine); panics with WebDriver's last words after that.
    pub async fn click_when_ready(&self, css: &str, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let clicked = async {
                let found = self
                    .try_command(
                        reqwest::Method::POST,
                        "/element",
                        Some(json!({"using": "css selector", "value": css})),
                    )
                    .await?;
                let id = found[ELEMENT_KEY].as_str().unwrap_or_default().to_string();
                self.try_command(
                    reqwest::Method::POST,
                    &format!("/element/{id}/click"),
                    Some(json!({})),
                )
                .await
            }
            .await;
            match clicked {
                Ok(_) => return,
                Err(e) if Instant::now() > deadline => {
                    let page = self.what_the_page_shows().await;
                    panic!("no {css} to click in {within:?}: {e}\n{page}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    }

    /// What a failed wait prints: the page's address and title, the start of its text, and every
    /// request of the page that failed or answered 4xx/5xx (with its status), so that a page that
    /// never drew says whether it was slow or was refused something.
    pub async fn what_the_page_shows(&self) -> String {
        let page = self
            .try_command(
                reqwest::Method::POST,
                "/execute/sync",
                Some(json!({"script": "return {url: location.href, title: document.title, \
                    text: (document.body ? document.body.innerText : '').slice(0, 1500), \
                    resources: performance.getEntriesByType('resource').length, \
                    failed: performance.getEntriesByType('resource') \
                        .filter(r => r.responseStatus === 0 || r.responseStatus >= 400) \
                        .map(r => r.responseStatus + ' ' + r.name + ' ' + Math.round(r.duration) + 'ms')};",
                    "args": []})),
            )
            .await;
        match page {
            Ok(v) => format!("the page: {v:#}"),
            Err(e) => format!("the page could not be read: {e}"),
        }
    }

    /// Signs in on `base`'s sign-in page with the portal's form.
    pub async fn sign_in(&self, base: &str, username: &str, password: &str) {
        self.goto(&format!("{base}/signin")).await;
        self.type_into("#username", username).await;
        self.type_into("#password", password).await;
        self.follow("#signin").await;
    }

    /// POSTs the form-encoded `body` to `path` from inside the signed-in page (same origin, its
    /// cookie, no CSRF token unless `body` has one), not following a redirect: the status.
    pub async fn post_from_page(&self, path: &str, body: &str) -> u64 {
        let script = format!(
            "const done = arguments[0];
             fetch('{path}', {{method: 'POST', redirect: 'manual',
                 headers: {{'Content-Type': 'application/x-www-form-urlencoded'}}, body: '{body}'}})
               .then(r => done(r.status)).catch(e => done(String(e)));"
        );
        let status = self.run_async(&script).await;
        status
            .as_u64()
            .unwrap_or_else(|| panic!("post {path}: {status}"))
    }

    pub async fn goto(&self, url: &str) {
        self.command(reqwest::Method::POST, "/url", Some(json!({"url": url})))
            .await;
    }

    pub async fn url(&self) -> String {
        let v = self.command(reqwest::Method::GET, "/url", None).await;
        v.as_str().unwrap_or_default().to_string()
    }

    /// The first element matching `css`; panics when there is none.
    pub async fn find(&self, css: &str) -> Element {
        let v = self
            .command(
                reqwest::Method::POST,
                "/element",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        match v[ELEMENT_KEY].as_str() {
            Some(id) => Element(id.to_string()),
            None => panic!("no element {css} on {}: {v}", self.url().await),
        }
    }

    /// How many elements match `css`.
    pub async fn count(&self, css: &str) -> usize {
        let v = self
            .command(
                reqwest::Method::POST,
                "/elements",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        v.as_array().map_or(0, Vec::len)
    }

    pub async fn text(&self, css: &str) -> String {
        let el = self.find(css).await;
        let v = self
            .command(
                reqwest::Method::GET,
                &format!("/element/{}/text", el.0),
                None,
            )
            .await;
        v.as_str().unwrap_or_default().to_string()
    }

    pub async fn type_into(&self, css: &str, text: &str) {
        let el = self.find(css).await;
        self.command(
            reqwest::Method::POST,
            &format!("/element/{}/clear", el.0),
            Some(json!({})),
        )
        .await;
        self.command(
            reqwest::Method::POST,
            &format!("/element/{}/value", el.0),
            Some(json!({"text": text})),
        )
        .await;
    }

    /// Sends keys to an element without clearing it first (an editor that is not a form field).
    pub async fn keys(&self, css: &str, text: &str) {
        let el = self.find(css).await;
        self.command(
            reqwest::Method::POST,
            &format!("/element/{}/value", el.0),
            Some(json!({"text": text})),
        )
        .await;
    }

    pub async fn click(&self, css: &str) {
        let el = self.find(css).await;
        self.command(
            reqwest::Method::POST,
            &format!("/element/{}/click", el.0),
            Some(json!({})),
        )
        .await;
    }

    /// Clicks what leads to another page (a link, a form's button) and waits, up to 60 s, until
    /// the new page has loaded.
    pub async fn follow(&self, css: &str) {
        self.run("window.__cohortOldPage = true; return true;")
            .await;
        self.click(css).await;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let loaded = self
                .run(
                    "return window.__cohortOldPage !== true && document.readyState === 'complete';",
                )
                .await;
            if loaded == true {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "no new page 60 s after clicking {css}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Runs a script in the page and returns its value.
    pub async fn run(&self, script: &str) -> Value {
        self.command(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({"script": script, "args": []})),
        )
        .await
    }

    /// Runs an async script in the page (`arguments[0]` is its callback) and returns its value.
    pub async fn run_async(&self, script: &str) -> Value {
        self.command(
            reqwest::Method::POST,
            "/execute/async",
            Some(json!({"script": script, "args": []})),
        )
        .await
    }

    /// The browser's cookies for the current page, as WebDriver describes them.
    pub async fn cookies(&self) -> Vec<Value> {
        let v = self.command(reqwest::Method::GET, "/cookie", None).await;
        v.as_array().cloned().unwrap_or_default()
    }

    /// Makes the page `width` CSS pixels wide (`height` high) as a phone or a laptop shows it:
    /// Chromium's device emulation over chromedriver's DevTools command, as a window cannot be
    /// made narrower than the desktop's minimum.
    pub async fn viewport(&self, width: u32, height: u32) {
        self.command(
            reqwest::Method::POST,
            "/goog/cdp/execute",
            Some(
                json!({"cmd": "Emulation.setDeviceMetricsOverride", "params": {
                    "width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600,
                }}),
            ),
        )
        .await;
    }

    /// Saves a PNG of the viewport as `target/portal-screenshots/<name>.png`.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        use base64::Engine;
        let v = self
            .command(reqwest::Method::GET, "/screenshot", None)
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(v.as_str().expect("screenshot data"))
            .expect("screenshot base64");
        let path = self.shots.join(format!("{name}.png"));
        std::fs::write(&path, png).expect("write screenshot");
        path
    }
}

/// Sets `username`'s portal password with `cohort-controller password`, as an operator would,
/// against the controller whose database and state directory these are.
pub fn set_portal_password(db_url: &str, state: &Path, username: &str, password: &str) {
    use std::io::Write;
    let mut child = Command::new(crate::controller::controller_binary())
        .args(["password", username])
        .env("DATABASE_URL", db_url)
        .env("COHORT_STATE_DIR", state)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run cohort-controller password");
    writeln!(child.stdin.take().expect("stdin"), "{password}").expect("write password");
    let out = child.wait_with_output().expect("password output");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Ending the session closes Chromium; chromedriver goes with the kill.
        let session = self.session.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            if let Ok(rt) = rt {
                rt.block_on(async {
                    let _ = reqwest::Client::new()
                        .delete(session)
                        .timeout(Duration::from_secs(10))
                        .send()
                        .await;
                });
            }
        })
        .join();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
