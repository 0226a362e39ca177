//! Portal sign-ins as a browser makes them, without a browser: the sign-in form's CSRF cookie
//! and field, the form posted from one client (one TCP peer, 127.0.0.1, as a campus NAT is);
//! the answer's status and how long it took.

use std::time::{Duration, Instant};

use crate::cluster::Cluster;

/// The sign-in cookie the form's `csrf` field must match (`SIGN_IN_COOKIE`).
const SIGN_IN_COOKIE: &str = "__Host-cohort_sign_in";

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
        // Any value works: the form's field need only match the cookie.
        let csrf = format!("csrf-{}", crate::unique_suffix());
        let started = Instant::now();
        let res = self
            .http
            .post(format!("{}/signin", self.base))
            .header(reqwest::header::COOKIE, format!("{SIGN_IN_COOKIE}={csrf}"))
            .form(&[
                ("csrf", csrf.as_str()),
                ("username", username),
                ("password", password),
            ])
            .send()
            .await
            .expect("the portal answers");
        let status = res.status().as_u16();
        let _ = res.bytes().await;
        SignIn {
            status,
            took: started.elapsed(),
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
