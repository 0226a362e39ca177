//! `GET /1.0` (the server, as trusted and untrusted clients see it) and `/1.0/certificates`
//! (redeeming a trust token; listing the caller's trusted certificates).

use actix_web::{HttpRequest, HttpResponse};
use serde::Deserialize;
use serde_json::json;

use super::reply::{sync, LxdError, LxdReply};
use super::{Ctl, LxdClient, LxdPeer};
use crate::error::ActionError;
use crate::nodes::lxd_trust;

/// The API extensions Cohort implements and the 5.0 client checks before using a feature:
/// only these, so the client never takes a path Cohort does not serve.
pub const API_EXTENSIONS: &[&str] = &[
    "etag",
    "clustering",
    "container_full",
    "projects",
    "certificate_token",
    "instances",
    "instance_all_projects",
    "operation_description",
    "api_filtering",
    // `lxc info` needs it; instances list no backups, and making one is refused.
    "container_backup",
    // `lxc exec --user/--group/--cwd`.
    "container_exec_user_group_cwd",
    // A trust token in `trust_token` (Incus's client, LXD 5.21+, pylxd's `authenticate`).
    "explicit_trust_token",
    // `lxc network list|show`, `lxc storage list|show|info` (read-only fleet views).
    "network",
    "storage",
    "resources",
    // `lxc console --show-log`.
    "console",
];

/// The server's LXD version as clients compare it: the one whose behaviour this API follows.
pub const SERVER_VERSION: &str = "5.0.2";

pub async fn root() -> HttpResponse {
    sync(["/1.0"])
}

/// `GET /1.0`: the full server for a trusted certificate, LXD's untrusted answer otherwise.
pub async fn get(ctl: Ctl, req: HttpRequest) -> LxdReply {
    let trusted = match req.conn_data::<LxdPeer>() {
        Some(peer) => {
            let bearer = crate::accounts::auth::Bearer::lxd_certificate(&peer.fingerprint());
            match ctl.db(move |conn| bearer.caller(conn)).await {
                Ok(caller) => Some(caller),
                Err(ActionError::Unauthenticated(_)) => None,
                Err(e) => return Err(e.into()),
            }
        }
        None => None,
    };
    let mut server = json!({
        "api_extensions": API_EXTENSIONS,
        "api_status": "stable",
        "api_version": "1.0",
        "auth": if trusted.is_some() { "trusted" } else { "untrusted" },
        "public": false,
        "auth_methods": ["tls"],
    });
    if let Some(caller) = trusted {
        let address = ctl.config.lxd_address().unwrap_or_default();
        server["auth_user_name"] = json!(caller.name());
        server["auth_user_method"] = json!("tls");
        server["config"] = json!({});
        server["environment"] = json!({
            "addresses": [address],
            "architectures": ["x86_64"],
            "certificate": ctl.pki.server_cert_pem,
            "certificate_fingerprint": crate::nodes::pki::pem_fingerprint(&ctl.pki.server_cert_pem),
            "driver": "lxc",
            "driver_version": "",
            "firewall": "",
            "kernel": "Linux",
            "kernel_architecture": "x86_64",
            "kernel_features": {},
            "kernel_version": "",
            "lxc_features": {},
            "os_name": "Cohort",
            "os_version": env!("CARGO_PKG_VERSION"),
            // The project the client asked for, as LXD echoes it (pylxd checks it).
            "project": project_asked(&req),
            "server": "lxd",
            "server_clustered": true,
            "server_event_mode": "full-mesh",
            "server_name": "cohort",
            "server_pid": std::process::id(),
            "server_version": SERVER_VERSION,
            "storage": "",
            "storage_version": "",
            "storage_supported_drivers": [],
        });
    }
    Ok(sync(server))
}

/// The `?project=` of a request, `default` without one.
fn project_asked(req: &HttpRequest) -> String {
    actix_web::web::Query::<std::collections::HashMap<String, String>>::from_query(
        req.query_string(),
    )
    .ok()
    .and_then(|q| q.get("project").filter(|p| !p.is_empty()).cloned())
    .unwrap_or_else(|| "default".into())
}

/// `api.CertificatesPost`. The 5.0 `lxc remote add REMOTE TOKEN` sends the token as
/// `password`; Incus's `incus remote add` and LXD 5.21+ send it as `trust_token`; pylxd's
/// `authenticate` sends either, with the client's own certificate in `certificate`.
#[derive(Debug, Deserialize)]
pub struct CertificatesPost {
    #[serde(default, deserialize_with = "super::null_is_default")]
    password: String,
    #[serde(default, deserialize_with = "super::null_is_default")]
    trust_token: String,
    #[serde(default, rename = "type", deserialize_with = "super::null_is_default")]
    kind: String,
    /// A certificate (base64 DER, PEM armour optional). The client's own is accepted; another
    /// is refused: only LXD admins add those, and Cohort trusts only the certificate the client
    /// proved it holds.
    #[serde(default, deserialize_with = "super::null_is_default")]
    certificate: String,
}

impl CertificatesPost {
    /// The token, from whichever field the client put it in.
    fn token(&self) -> &str {
        if self.trust_token.is_empty() {
            &self.password
        } else {
            &self.trust_token
        }
    }

    /// Whether `certificate` is empty or the DER the connection presented.
    fn names_only(&self, der: &[u8]) -> bool {
        use base64::Engine;
        let body: String = self
            .certificate
            .lines()
            .filter(|l| !l.starts_with("-----"))
            .flat_map(|l| l.chars().filter(|c| !c.is_whitespace()))
            .collect();
        body.is_empty()
            || base64::engine::general_purpose::STANDARD
                .decode(body)
                .is_ok_and(|given| given == der)
    }
}

/// `POST /1.0/certificates`: trusts the connection's certificate with a trust token. The answer
/// names the new entry in `Location`, which pylxd reads.
pub async fn add_certificate(
    ctl: Ctl,
    req: HttpRequest,
    body: actix_web::web::Json<CertificatesPost>,
) -> LxdReply {
    let peer = req
        .conn_data::<LxdPeer>()
        .cloned()
        .ok_or_else(|| LxdError::BadRequest("No client certificate provided".into()))?;
    if !body.kind.is_empty() && body.kind != "client" {
        return Err(LxdError::BadRequest(format!(
            "Unknown request type {}",
            body.kind
        )));
    }
    if !body.names_only(&peer.0) {
        return Err(LxdError::not_supported(
            "adding a certificate other than the client's own (use cohort config trust add)",
        ));
    }
    if body.token().is_empty() {
        return Err(ActionError::Forbidden("a trust token is needed".into()).into());
    }
    let fingerprint = peer.fingerprint();
    lxd_trust::redeem(&ctl, peer.0, body.token().to_string()).await?;
    let mut reply = sync(json!({}));
    reply.headers_mut().insert(
        actix_web::http::header::LOCATION,
        actix_web::http::header::HeaderValue::from_str(&format!("/1.0/certificates/{fingerprint}"))
            .map_err(|e| LxdError::BadRequest(e.to_string()))?,
    );
    Ok(reply)
}

/// `api.Certificate` for a trust entry; Cohort does not hand certificates back.
fn lxd_certificate(fingerprint: &str, name: &str) -> serde_json::Value {
    json!({"fingerprint": fingerprint, "name": name, "type": "client",
           "restricted": true, "projects": [], "certificate": ""})
}

/// `GET /1.0/certificates/{fingerprint}`: one trust entry the caller may see (a unique prefix
/// of its fingerprint, as LXD takes it).
pub async fn certificate(
    ctl: Ctl,
    client: LxdClient,
    fingerprint: actix_web::web::Path<String>,
) -> LxdReply {
    let wanted = fingerprint.into_inner();
    let caller = ctl.db(move |conn| client.0.caller(conn)).await?;
    let entries = lxd_trust::list(&ctl, caller).await?;
    let mut found = entries.iter().filter_map(|e| {
        e.fingerprint
            .as_deref()
            .filter(|fp| !wanted.is_empty() && fp.starts_with(&wanted))
            .map(|fp| (fp, &e.name))
    });
    match (found.next(), found.next()) {
        (Some((fp, name)), None) => Ok(sync(lxd_certificate(fp, name))),
        (Some(_), Some(_)) => Err(LxdError::BadRequest(
            "More than one certificate matches".into(),
        )),
        (None, _) => Err(ActionError::NotFound("Certificate".into()).into()),
    }
}

/// `GET /1.0/certificates`: the trust entries the caller may see, as URLs or objects.
pub async fn certificates(ctl: Ctl, client: LxdClient, req: HttpRequest) -> LxdReply {
    let caller = ctl.db(move |conn| client.0.caller(conn)).await?;
    let entries = lxd_trust::list(&ctl, caller).await?;
    let recursive = req.query_string().contains("recursion=1");
    let certs = entries
        .into_iter()
        .filter_map(|e| Some((e.fingerprint?, e.name)));
    Ok(if recursive {
        sync(
            certs
                .map(|(fp, name)| lxd_certificate(&fp, &name))
                .collect::<Vec<_>>(),
        )
    } else {
        sync(
            certs
                .map(|(fp, _)| format!("/1.0/certificates/{fp}"))
                .collect::<Vec<_>>(),
        )
    })
}

/// Profiles, networks and VMs: LXD has them, Cohort does not offer them.
pub async fn not_supported(req: HttpRequest) -> LxdReply {
    Err(LxdError::not_supported(req.path().to_string()))
}

/// `GET /1.0/instances/{name}/backups`: Cohort keeps no LXD backups of instances (snapshots and
/// the controller's own backup instead), so the list is empty.
pub async fn no_backups() -> HttpResponse {
    sync(Vec::<String>::new())
}
