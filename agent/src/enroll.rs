//! Enrollment (`cohort-agent join TOKEN`): decode the join token, make the agent's own key and a
//! CSR, fetch the controller's CA and pin it by the token's fingerprint, then enroll with that CA
//! as the only trust root and save key (0600), certificate, CA and config in the state directory.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

use base64::Engine;
use chrono::Utc;
use cohort_proto::enroll::{EnrollRequest, EnrollResponse, JoinToken};
use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair};

use crate::config::AgentConfig;

#[derive(Debug, thiserror::Error)]
pub enum EnrollError {
    /// the join token is malformed
    #[error("the join token is not valid: {0}")]
    Token(String),
    /// the join token has expired
    #[error("the join token expired at {0}; ask an admin for a new one (cohort node add)")]
    Expired(chrono::DateTime<Utc>),
    /// the CA the controller serves is not the one the token pins
    #[error("the controller's CA fingerprint is {got}, but the join token pins {want}: refusing to enroll")]
    FingerprintMismatch { want: String, got: String },
    /// the controller could not be reached or refused
    #[error("{step} at {url}: {message}")]
    Http {
        step: &'static str,
        url: String,
        message: String,
    },
    /// a key, CSR or certificate could not be made or read
    #[error("{0}")]
    Crypto(String),
    /// the state directory could not be written
    #[error("writing {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
}

/// What `join` needs besides the token.
pub struct JoinOptions {
    pub state_dir: std::path::PathBuf,
    pub listen: std::net::SocketAddr,
    /// URL the controller calls this agent on (`https://host:port`).
    pub agent_url: String,
    pub ssh_host: String,
    pub ssh_port_first: u16,
    pub ssh_port_last: u16,
    pub lxd_project: Option<String>,
    pub storage_pool: Option<String>,
    /// The daemon's socket; default: the one the agent finds now (Incus's where both run). It
    /// is written into the config either way, so the node keeps the daemon it enrolled with
    /// when the other is installed later.
    pub lxd_socket: Option<std::path::PathBuf>,
}

/// Decodes a token (base64 of the `JoinToken` JSON) and refuses an expired one.
pub fn decode_token(token: &str) -> Result<JoinToken, EnrollError> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .map_err(|e| EnrollError::Token(format!("not base64: {e}")))?;
    let token: JoinToken =
        serde_json::from_slice(&bytes).map_err(|e| EnrollError::Token(e.to_string()))?;
    if token.expires_at <= Utc::now() {
        return Err(EnrollError::Expired(token.expires_at));
    }
    cohort_proto::validate::instance_name(&token.node_name)
        .map_err(|e| EnrollError::Token(format!("node name: {e}")))?;
    Ok(token)
}

/// A fresh key pair and a PEM CSR with CN = the node name.
pub fn key_and_csr(node_name: &str) -> Result<(KeyPair, String), EnrollError> {
    let crypto = |e: rcgen::Error| EnrollError::Crypto(format!("making the CSR: {e}"));
    let key = KeyPair::generate().map_err(crypto)?;
    let mut params = CertificateParams::new(vec![node_name.to_string()]).map_err(crypto)?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, node_name);
    params.distinguished_name = dn;
    let csr = params.serialize_request(&key).map_err(crypto)?;
    Ok((key, csr.pem().map_err(crypto)?))
}

/// SHA-256 of the first certificate's DER in `pem`, lowercase hex.
pub fn ca_fingerprint(pem: &str) -> Result<String, EnrollError> {
    let certs = crate::tls::certs_from_pem("CA certificate", pem.as_bytes())
        .map_err(|e| EnrollError::Crypto(e.to_string()))?;
    Ok(cohort_tls::fingerprint(&certs[0]))
}

/// Refuses a CA whose fingerprint is not the pinned one.
pub fn check_ca(pem: &str, pinned: &str) -> Result<(), EnrollError> {
    let got = ca_fingerprint(pem)?;
    if got != pinned.to_ascii_lowercase() {
        return Err(EnrollError::FingerprintMismatch {
            want: pinned.to_string(),
            got,
        });
    }
    Ok(())
}

fn http_error<'a>(step: &'static str, url: &'a str) -> impl Fn(reqwest::Error) -> EnrollError + 'a {
    move |e| EnrollError::Http {
        step,
        url: url.to_string(),
        message: format!("{e:#}"),
    }
}

/// Runs the whole enrollment and writes the state directory; returns the config written.
pub async fn join(token: &str, opts: &JoinOptions) -> Result<AgentConfig, EnrollError> {
    let token = decode_token(token)?;
    let base = token.controller_url.trim_end_matches('/');

    // Unverified on purpose: the CA is checked against the pinned fingerprint below.
    let ca_url = format!("{base}/api/v1/ca");
    let insecure = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .map_err(http_error("building the HTTP client", &ca_url))?;
    let ca_pem = insecure
        .get(&ca_url)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(http_error("fetching the CA", &ca_url))?
        .text()
        .await
        .map_err(http_error("fetching the CA", &ca_url))?;
    check_ca(&ca_pem, &token.ca_fingerprint)?;
    if !base.starts_with("https://") {
        return Err(EnrollError::Token(format!(
            "controller_url {base} is not https: the secret and CSR must go over TLS pinned to the CA"
        )));
    }

    let (key, csr_pem) = key_and_csr(&token.node_name)?;
    let enroll_url = format!("{base}/api/v1/enroll");
    let ca = reqwest::Certificate::from_pem(ca_pem.as_bytes())
        .map_err(|e| EnrollError::Crypto(format!("the CA: {e}")))?;
    let pinned = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(ca)
        .build()
        .map_err(http_error("building the HTTP client", &enroll_url))?;
    let request = EnrollRequest {
        node_name: token.node_name.clone(),
        secret: token.secret.clone(),
        csr_pem,
        agent_url: opts.agent_url.clone(),
        ssh_host: opts.ssh_host.clone(),
        ssh_port_first: opts.ssh_port_first,
        ssh_port_last: opts.ssh_port_last,
    };
    let resp = pinned
        .post(&enroll_url)
        .json(&request)
        .send()
        .await
        .map_err(http_error("enrolling", &enroll_url))?;
    if !resp.status().is_success() {
        let status = resp.status();
        let body = resp.text().await.unwrap_or_default();
        return Err(EnrollError::Http {
            step: "enrolling",
            url: enroll_url,
            message: format!("HTTP {status}: {body}"),
        });
    }
    let answer: EnrollResponse = resp
        .json()
        .await
        .map_err(http_error("reading the enrollment answer", &enroll_url))?;

    let mut config = AgentConfig::new(&token.node_name);
    config.state_dir = opts.state_dir.clone();
    config.listen = opts.listen;
    if let Some(p) = &opts.lxd_project {
        config.lxd_project = p.clone();
    }
    if let Some(p) = &opts.storage_pool {
        config.storage_pool = p.clone();
    }
    config.lxd_socket = Some(
        opts.lxd_socket
            .clone()
            .unwrap_or_else(|| config.lxd_socket()),
    );
    write_state(
        &config,
        &key.serialize_pem(),
        &answer.certificate_pem,
        &ca_pem,
    )?;
    Ok(config)
}

/// Writes key (0600), certificate, CA and config into the state directory (made 0700).
pub fn write_state(
    config: &AgentConfig,
    key_pem: &str,
    cert_pem: &str,
    ca_pem: &str,
) -> Result<(), EnrollError> {
    let dir = &config.state_dir;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| EnrollError::Write {
            path: dir.display().to_string(),
            source,
        })?;
    write_file(&config.key_path(), key_pem, 0o600)?;
    write_file(&config.cert_path(), cert_pem, 0o644)?;
    write_file(&config.ca_path(), ca_pem, 0o644)?;
    write_file(&config.config_path(), &config.to_toml(), 0o644)
}

fn write_file(path: &Path, text: &str, mode: u32) -> Result<(), EnrollError> {
    let err = |source| EnrollError::Write {
        path: path.display().to_string(),
        source,
    };
    let _ = std::fs::remove_file(path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(err)?;
    f.write_all(text.as_bytes()).map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token_b64(expires_in: chrono::Duration) -> String {
        let t = JoinToken {
            controller_url: "https://127.0.0.1:1".into(),
            ca_fingerprint: "00".repeat(32),
            node_name: "gpu-01".into(),
            secret: "s".into(),
            expires_at: Utc::now() + expires_in,
        };
        base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(&t).unwrap())
    }

    #[test]
    fn csr_carries_the_node_name_and_a_fresh_key() {
        let (key, pem) = key_and_csr("gpu-01").unwrap();
        let der = rustls_pemfile::csr(&mut pem.as_bytes()).unwrap().unwrap();
        use x509_parser::prelude::FromDer;
        let (_, csr) =
            x509_parser::certification_request::X509CertificationRequest::from_der(der.as_ref())
                .unwrap();
        let cn: Vec<_> = csr
            .certification_request_info
            .subject
            .iter_common_name()
            .map(|c| c.as_str().unwrap().to_string())
            .collect();
        assert_eq!(cn, vec!["gpu-01"]);
        assert_eq!(
            csr.certification_request_info
                .subject_pki
                .subject_public_key
                .data
                .as_ref(),
            key.public_key_raw()
        );
        csr.verify_signature().expect("self-signed by the key");
    }

    #[test]
    fn fingerprint_is_sha256_of_der_and_a_mismatch_is_refused() {
        let key = KeyPair::generate().unwrap();
        let ca = CertificateParams::new(Vec::<String>::new())
            .unwrap()
            .self_signed(&key)
            .unwrap();
        use sha2::{Digest, Sha256};
        let want = hex::encode(Sha256::digest(ca.der()));
        assert_eq!(ca_fingerprint(&ca.pem()).unwrap(), want);
        check_ca(&ca.pem(), &want.to_uppercase()).expect("case does not matter");
        let err = check_ca(&ca.pem(), &"ab".repeat(32)).unwrap_err();
        assert!(
            matches!(err, EnrollError::FingerprintMismatch { .. }),
            "{err}"
        );
    }

    #[test]
    fn tokens_are_decoded_and_expired_or_garbled_ones_refused() {
        assert_eq!(
            decode_token(&token_b64(chrono::Duration::hours(1)))
                .unwrap()
                .node_name,
            "gpu-01"
        );
        let expired = decode_token(&token_b64(chrono::Duration::hours(-1))).unwrap_err();
        assert!(matches!(expired, EnrollError::Expired(_)));
        assert!(matches!(decode_token("%%%"), Err(EnrollError::Token(_))));
        let not_json = base64::engine::general_purpose::STANDARD.encode("{}");
        assert!(matches!(
            decode_token(&not_json),
            Err(EnrollError::Token(_))
        ));
    }
}
