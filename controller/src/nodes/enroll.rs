//! Enrollment: an admin's join token and a node's CSR become that node's certificate.

use base64::Engine;
use chrono::{Duration, Utc};
use cohort_proto::api::nodes::{CreateJoinToken, JoinTokenIssued};
use cohort_proto::api::users::Role;
use cohort_proto::enroll::{EnrollRequest, EnrollResponse, JoinToken};
use diesel::prelude::*;
use serde_json::json;

use crate::accounts::auth::{new_secret, sha256, Caller};
use crate::app::state::Controller;
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::audit;
use crate::db::models::join_token::JoinTokenRow;
use crate::db::models::node::{NewNode, Node};
use crate::db::models::node_certificate::NodeCertificate;
use crate::error::{ActionError, ActionResult};
use crate::nodes::pki::PkiError;
use crate::validate;

/// Default and longest lifetime of a join token.
const DEFAULT_TTL_S: u32 = 3600;
const MAX_TTL_S: u32 = 7 * 24 * 3600;

/// `POST /api/v1/nodes/tokens`.
pub async fn create_join_token(
    ctl: &Controller,
    caller: Caller,
    req: CreateJoinToken,
) -> ActionResult<JoinTokenIssued> {
    caller.require(Role::Admin)?;
    validate::instance_name("node_name", &req.node_name)?;
    let ttl = req.ttl_seconds.unwrap_or(DEFAULT_TTL_S);
    if ttl == 0 || ttl > MAX_TTL_S {
        return Err(ActionError::invalid(
            "ttl_seconds",
            format!("must be 1 to {MAX_TTL_S}"),
        ));
    }
    let addresses = check_addresses(&req.addresses)?;
    let secret = new_secret();
    let expires_at = Utc::now() + Duration::seconds(i64::from(ttl));
    let token = JoinToken {
        controller_url: ctl.config.public_url(),
        ca_fingerprint: ctl.pki.ca_fingerprint(),
        node_name: req.node_name.clone(),
        secret: secret.clone(),
        expires_at,
    };
    let encoded = base64::engine::general_purpose::STANDARD
        .encode(serde_json::to_vec(&token).map_err(|e| ActionError::Internal(e.to_string()))?);
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            JoinTokenRow::insert(
                conn,
                &req.node_name,
                &sha256(&secret),
                caller.user.id,
                expires_at,
                &addresses,
            )?;
            audit::record(
                conn,
                caller.name(),
                AuditAction::CreateJoinToken,
                AuditObject::Node,
                &req.node_name,
                json!({"expires_at": expires_at, "addresses": addresses}),
            )?;
            Ok(())
        })
    })
    .await?;
    Ok(JoinTokenIssued {
        token: encoded,
        node_name: token.node_name,
        expires_at,
    })
}

/// Longest list of addresses a join token takes.
const MAX_ADDRESSES: usize = 16;

/// The admin's addresses for a node, each an IP address or a DNS name, lowercased.
fn check_addresses(addresses: &[String]) -> ActionResult<Vec<String>> {
    if addresses.len() > MAX_ADDRESSES {
        return Err(ActionError::invalid(
            "addresses",
            format!("at most {MAX_ADDRESSES} addresses"),
        ));
    }
    addresses
        .iter()
        .map(|a| {
            let a = a.trim().to_ascii_lowercase();
            let dns_name = a.len() <= 253
                && a.split('.').all(|label| {
                    (1..=63).contains(&label.len())
                        && label
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                        && !label.starts_with('-')
                        && !label.ends_with('-')
                });
            if a.parse::<std::net::IpAddr>().is_ok() || dns_name {
                Ok(a)
            } else {
                Err(ActionError::invalid(
                    "addresses",
                    format!("{a:?} is neither an IP address nor a DNS name"),
                ))
            }
        })
        .collect()
}

fn check_request(req: &EnrollRequest) -> ActionResult<String> {
    validate::instance_name("node_name", &req.node_name)?;
    validate::text("ssh_host", &req.ssh_host)?;
    if req.ssh_host.is_empty() {
        return Err(ActionError::invalid("ssh_host", "must not be empty"));
    }
    if req.ssh_port_first == 0 || req.ssh_port_first > req.ssh_port_last {
        return Err(ActionError::invalid(
            "ssh_port_first",
            "the port range must be first <= last, both > 0",
        ));
    }
    let url = reqwest::Url::parse(&req.agent_url)
        .map_err(|e| ActionError::invalid("agent_url", format!("not a URL: {e}")))?;
    if url.scheme() != "https" {
        return Err(ActionError::invalid("agent_url", "must be https"));
    }
    let host = url
        .host_str()
        .ok_or_else(|| ActionError::invalid("agent_url", "has no host"))?;
    Ok(host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase())
}

/// Why a token could not be spent, for a clear refusal.
fn refusal(conn: &mut PgConnection, req: &EnrollRequest) -> ActionResult<ActionError> {
    let now = Utc::now();
    Ok(
        match JoinTokenRow::by_secret_hash(conn, &sha256(&req.secret))? {
            None => ActionError::Unauthenticated("unknown join token".into()),
            Some(t) if t.used_at.is_some() => {
                ActionError::Unauthenticated("this join token was already used".into())
            }
            Some(t) if t.expires_at <= now => {
                ActionError::Unauthenticated("this join token has expired".into())
            }
            Some(t) => ActionError::Forbidden(format!(
                "this join token is for node {:?}, not {:?}",
                t.node_name, req.node_name
            )),
        },
    )
}

/// `POST /api/v1/enroll`: spends the token, issues the node's certificate (from the CSR's public
/// key only, with the names the admin gave) and records the node, all in one transaction: a
/// refusal after the token is found (an agent URL on a name the admin did not give, a bad CSR)
/// leaves it unspent.
pub async fn enroll(ctl: &Controller, req: EnrollRequest) -> ActionResult<EnrollResponse> {
    let agent_host = check_request(&req)?;
    let pki = ctl.pki.clone();
    let life = ctl.node_cert_lifetime();
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let Some(token) =
                JoinTokenRow::spend(conn, &sha256(&req.secret), &req.node_name, Utc::now())?
            else {
                return Err(refusal(conn, &req)?);
            };
            let names = token.certificate_names();
            if !names.contains(&agent_host) {
                return Err(ActionError::invalid(
                    "agent_url",
                    format!(
                        "{agent_host} is not a name the admin gave for node {} ({}); ask for a \
                         join token with `cohort node add {} --address {agent_host}`",
                        req.node_name,
                        names.join(", "),
                        req.node_name
                    ),
                ));
            }
            let issued = pki
                .issue_node_certificate(&req.csr_pem, &req.node_name, &names, life)
                .map_err(|e| match e {
                    PkiError::InvalidCsr(e) => {
                        ActionError::invalid("csr_pem", format!("invalid CSR: {e}"))
                    }
                    other => other.into(),
                })?;
            NodeCertificate::revoke_all(conn, &req.node_name)?;
            NodeCertificate::insert(
                conn,
                &req.node_name,
                &issued.fingerprint,
                &issued.pem,
                issued.not_after,
            )?;
            Node::upsert(
                conn,
                &NewNode {
                    name: &req.node_name,
                    agent_url: &req.agent_url,
                    ssh_host: &req.ssh_host,
                    ssh_port_first: i32::from(req.ssh_port_first),
                    ssh_port_last: i32::from(req.ssh_port_last),
                },
            )?;
            audit::record(
                conn,
                &format!("node:{}", req.node_name),
                AuditAction::Enroll,
                AuditObject::Node,
                &req.node_name,
                json!({"fingerprint": issued.fingerprint, "agent_url": req.agent_url,
                       "names": names}),
            )?;
            Ok(EnrollResponse {
                certificate_pem: issued.pem,
                ca_pem: pki.ca_pem().to_string(),
            })
        })
    })
    .await
}
