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
        let address = ctl
            .config
            .server
            .lxd_address
            .clone()
            .or_else(|| ctl.config.server.lxd_listen.map(|a| a.to_string()))
            .unwrap_or_default();
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
            "project": "default",
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

/// `api.CertificatesPost`: `lxc remote add REMOTE TOKEN` sends the token as `password`.
#[derive(Debug, Deserialize)]
pub struct CertificatesPost {
    #[serde(default)]
    password: String,
    #[serde(default, rename = "type")]
    kind: String,
    /// A certificate other than the caller's own: only LXD admins add those; Cohort trusts
    /// only the certificate the client proved it holds.
    #[serde(default)]
    certificate: String,
}

/// `POST /1.0/certificates`: trusts the connection's certificate with a trust token.
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
    if !body.certificate.is_empty() {
        return Err(LxdError::not_supported(
            "adding a certificate other than the client's own (use cohort config trust add)",
        ));
    }
    if body.password.is_empty() {
        return Err(ActionError::Forbidden("a trust token is needed".into()).into());
    }
    lxd_trust::redeem(&ctl, peer.0, body.password.clone()).await?;
    Ok(sync(json!({})))
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
                .map(|(fp, name)| {
                    json!({"fingerprint": fp, "name": name, "type": "client",
                           "restricted": true, "projects": [], "certificate": ""})
                })
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
