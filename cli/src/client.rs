//! The controller's REST API over HTTPS with a pinned certificate and a bearer token. Every call
//! decodes the one error shape (`ErrorBody`) into lxc's `Error: <message>`.

use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use cohort_proto::api::operations::Operation;
use cohort_proto::ErrorBody;
use reqwest::{Method, RequestBuilder, Response};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::config::Remote;
use crate::tls;

/// Prefix of every API route.
pub const API: &str = "/api/v1";

/// One controller, reached the way its remote entry says.
#[derive(Debug, Clone)]
pub struct Client {
    base: String,
    token: String,
    http: reqwest::Client,
}

fn http_client(tls: rustls::ClientConfig) -> anyhow::Result<reqwest::Client> {
    reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .connect_timeout(Duration::from_secs(10))
        .user_agent(concat!("cohort/", env!("CARGO_PKG_VERSION")))
        .build()
        .context("building the HTTPS client")
}

/// The controller's port when a remote's URL names none (its default listen address's).
pub const DEFAULT_PORT: u16 = 8443;

/// A remote's address as lxc takes it: `host`, `host:port` or `https://host[:port]`; the scheme
/// defaults to https and the port to 8443. Anything but https is refused.
pub fn normalize_url(url: &str) -> anyhow::Result<String> {
    let full = if url.contains("://") {
        url.to_string()
    } else {
        format!("https://{url}")
    };
    let mut parsed = reqwest::Url::parse(&full).map_err(|e| anyhow!("Invalid URL {url:?}: {e}"))?;
    if parsed.scheme() != "https" {
        bail!("Invalid URL {url:?}: the controller is reached over https://");
    }
    if parsed.host_str().is_none() {
        bail!("Invalid URL {url:?}: no host");
    }
    if parsed.port().is_none() {
        parsed
            .set_port(Some(DEFAULT_PORT))
            .map_err(|()| anyhow!("Invalid URL {url:?}"))?;
    }
    Ok(parsed.as_str().trim_end_matches('/').to_string())
}

/// Connects to `url` accepting any certificate and returns the one the server presented (DER),
/// so that `remote add` can show its fingerprint before trusting it.
pub async fn fetch_certificate(url: &str) -> anyhow::Result<Vec<u8>> {
    let (config, slot) = tls::capture_config();
    let http = http_client(config)?;
    // Any answer will do, even an error status: only the handshake matters here.
    http.get(format!("{url}/healthz"))
        .send()
        .await
        .with_context(|| format!("Unable to connect to {url}"))?;
    let der = slot.lock().expect("capture slot").take();
    der.ok_or_else(|| anyhow!("{url} presented no certificate"))
}

impl Client {
    pub fn new(remote: &Remote) -> anyhow::Result<Self> {
        Ok(Client {
            base: remote.addr.trim_end_matches('/').to_string(),
            token: remote.token.clone(),
            http: http_client(tls::pinned_config(&remote.fingerprint))?,
        })
    }

    pub fn url(&self) -> &str {
        &self.base
    }

    /// A request to `/api/v1{path}` with the token.
    pub fn request(&self, method: Method, path: &str) -> RequestBuilder {
        self.http
            .request(method, format!("{}{API}{path}", self.base))
            .bearer_auth(&self.token)
    }

    /// Sends and turns a non-2xx answer into the controller's message.
    pub async fn send(&self, request: RequestBuilder) -> anyhow::Result<Response> {
        let response = request.send().await.map_err(|e| {
            // The TLS error with the fingerprint mismatch is a few sources down.
            let mut text = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                text = s.to_string();
                source = s.source();
            }
            anyhow!("Unable to connect to {}: {text}", self.base)
        })?;
        if response.status().is_success() {
            return Ok(response);
        }
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        Err(match serde_json::from_str::<ErrorBody>(&body) {
            Ok(ErrorBody { error }) => match error.field {
                Some(field) => anyhow!("{} (field: {field})", error.message),
                None => anyhow!("{}", error.message),
            },
            Err(_) if body.trim().is_empty() => anyhow!("{status}"),
            Err(_) => anyhow!("{status}: {}", body.trim()),
        })
    }

    pub async fn json<T: DeserializeOwned>(&self, request: RequestBuilder) -> anyhow::Result<T> {
        let response = self.send(request).await?;
        let bytes = response.bytes().await?;
        serde_json::from_slice(&bytes).context("the controller's answer is not what was expected")
    }

    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
        self.json(self.request(Method::GET, path)).await
    }

    /// Every page of a paged list: follows the answer's `Link: <...>; rel="next"` header.
    pub async fn get_all<T: DeserializeOwned>(&self, path: &str) -> anyhow::Result<Vec<T>> {
        let mut all = Vec::new();
        let mut next = Some(path.to_string());
        while let Some(path) = next.take() {
            let response = self.send(self.request(Method::GET, &path)).await?;
            next = response
                .headers()
                .get_all(reqwest::header::LINK)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .find_map(next_link)
                .map(|url| url.strip_prefix(API).unwrap_or(&url).to_string());
            let bytes = response.bytes().await?;
            let page: Vec<T> = serde_json::from_slice(&bytes)
                .context("the controller's answer is not what was expected")?;
            all.extend(page);
        }
        Ok(all)
    }

    pub async fn post<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> anyhow::Result<T> {
        self.json(self.request(Method::POST, path).json(body)).await
    }

    pub async fn put<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> anyhow::Result<T> {
        self.json(self.request(Method::PUT, path).json(body)).await
    }

    /// A call whose answer carries nothing the CLI needs (204, or an object it ignores).
    pub async fn call(&self, request: RequestBuilder) -> anyhow::Result<()> {
        self.send(request).await.map(drop)
    }

    /// Long-polls `/operations/{id}/wait` until the operation ends, reporting each state seen.
    pub async fn wait(
        &self,
        operation: &Operation,
        mut seen: impl FnMut(&Operation),
    ) -> anyhow::Result<Operation> {
        let mut current = operation.clone();
        seen(&current);
        while !current.status.is_final() {
            current = self
                .get(&format!("/operations/{}/wait?timeout=5", current.id))
                .await?;
            seen(&current);
        }
        Ok(current)
    }
}

/// Path segment escaping for names that came from the command line.
pub fn seg(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The target of a `Link` header's `rel="next"` entry.
fn next_link(header: &str) -> Option<String> {
    header.split(',').find_map(|entry| {
        let (target, params) = entry.trim().split_once(';')?;
        let is_next = params
            .split(';')
            .any(|p| p.trim().trim_start_matches("rel=").trim_matches('"') == "next");
        let url = target.trim().strip_prefix('<')?.strip_suffix('>')?;
        is_next.then(|| url.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::{next_link, normalize_url};

    #[test]
    fn urls_like_lxc() {
        let n = |u| normalize_url(u).unwrap();
        assert_eq!(n("lab.example.edu"), "https://lab.example.edu:8443");
        assert_eq!(n("10.0.0.5:9443"), "https://10.0.0.5:9443");
        assert_eq!(n("https://lab/"), "https://lab:8443");
        assert_eq!(n("https://127.0.0.1:4443"), "https://127.0.0.1:4443");
        assert!(normalize_url("http://lab").is_err());
    }

    #[test]
    fn next_link_is_found_among_others() {
        let header = r#"</api/v1/instances?limit=2&after=a>; rel="next", </x>; rel="prev""#;
        assert_eq!(
            next_link(header).as_deref(),
            Some("/api/v1/instances?limit=2&after=a")
        );
        assert_eq!(next_link(r#"</x>; rel="prev""#), None);
        assert_eq!(next_link("garbage"), None);
    }
}
