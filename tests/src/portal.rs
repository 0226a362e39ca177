//! Portal sign-ins as a browser makes them, without a browser: the sign-in form's CSRF cookie
//! and field, the form posted from one client (one TCP peer, 127.0.0.1, as a campus NAT is);
//! the answer's status and how long it took.

use std::time::{Duration, Instant};

use crate::cluster::Cluster;

/// The sign-in cookie the form's `csrf` field must match (`SIGN_IN_COOKIE`).
const SIGN_IN_COOKIE: &str = "__Host-cohort_sign_in";
/// The portal's session cookie (`SESSION_COOKIE`).
const SESSION_COOKIE: &str = "__Host-cohort_session";

/// A browser-less client of one cluster's portal.
#[derive(Clone)]
pub struct Portal {
    http: reqwest::Client,
    base: String,
}

/// One sign-in: the status (303 signed in, 401 wrong, 429 throttled) and its latency.
#[derive(Debug, Clone, Copy)]
pub struct SignIn {
    pub status: u16,
    pub took: Duration,
}

impl Portal {
    pub fn of(cluster: &Cluster) -> Self {
        let ca = std::fs::read(cluster.controller_dir().join("ca.crt")).expect("controller CA");
        let http = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&ca).expect("CA pem"))
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(120))
            .build()
            .expect("portal client");
        Portal {
            http,
            base: cluster.controller.url(),
        }
    }

    /// Posts the sign-in form for `username` with `password`.
    pub async fn sign_in(&self, username: &str, password: &str) -> SignIn {
        let started = Instant::now();
        let res = self
            .post_sign_in(username, password)
            .await
            .expect("the portal answers");
        let status = res.status().as_u16();
        let _ = res.bytes().await;
        SignIn {
            status,
            took: started.elapsed(),
        }
    }

    /// Signs `username` in and returns the session cookie's `name=value`, or `None` when the
    /// portal refused the sign-in.
    pub async fn session(&self, username: &str, password: &str) -> Option<String> {
        let res = self.post_sign_in(username, password).await.ok()?;
        res.headers()
            .get_all(reqwest::header::SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok()?.split(';').next())
            .find(|pair| pair.starts_with(SESSION_COOKIE) && !pair.ends_with('='))
            .map(str::to_string)
    }

    /// The sign-in form posted with its CSRF cookie.
    async fn post_sign_in(
        &self,
        username: &str,
        password: &str,
    ) -> reqwest::Result<reqwest::Response> {
        // Any value works: the form's field need only match the cookie.
        let csrf = format!("csrf-{}", crate::unique_suffix());
        self.http
            .post(format!("{}/signin", self.base))
            .header(reqwest::header::COOKIE, format!("{SIGN_IN_COOKIE}={csrf}"))
            .form(&[
                ("csrf", csrf.as_str()),
                ("username", username),
                ("password", password),
            ])
            .send()
            .await
    }

    /// `GET path` of the portal with the session cookie `session`; the status.
    pub async fn page(&self, path: &str, session: &str) -> u16 {
        match self
            .http
            .get(format!("{}{path}", self.base))
            .header(reqwest::header::COOKIE, session)
            .send()
            .await
        {
            Ok(res) => {
                let status = res.status().as_u16();
                let _ = res.bytes().await;
                status
            }
            Err(_) => 0,
        }
    }
}

/// The `q` quantile (0..=1) of `samples` (nearest rank); zero when there are none.
pub fn quantile(samples: &[Duration], q: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}
