//! Node certificate renewal, driven by the poller over the mutual-TLS channel the node's current
//! certificate secures. At two thirds of a certificate's life the controller asks the agent for a
//! CSR (the agent makes a new key and keeps the old pair in use), issues the new certificate for
//! the same node and names, records it as a second live pin, and hands it to the agent. Only
//! when the agent is seen serving the new certificate are the older ones revoked.
//!
//! A renewal cut off anywhere leaves a working identity: until confirmed, both certificates are
//! pinned (the agent serves the one it has), and the next poll asks the agent which it serves and
//! revokes the other. The agent's side of the same guarantee is `cohort_agent::identity`.
//!
//! Controllers sharing a database poll the same nodes: two renewals of one node at once could
//! each confirm their own new certificate and revoke the other's, the one the agent serves. So a
//! check holds the node's renewal lock (a PostgreSQL advisory lock, as the reclaimer's pass
//! does) from first read to last write, and reads the live certificates again once it has it:
//! if another controller changed them since this poll read them, this check leaves the node to
//! the next poll.

use chrono::{DateTime, Utc};
use cohort_proto::agent::InstallCertificate;
use serde_json::json;

use crate::agent_client::NodeAgent;
use crate::app::state::Controller;
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::audit;
use crate::db::models::node_certificate::NodeCertificate;
use crate::db::queries::coordination;
use crate::error::{ActionError, ActionResult};

/// What a check did, for the poller's log and the tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Renewal {
    /// The served certificate is young enough.
    NotDue,
    /// A certificate left from a cut-off renewal was revoked; the agent serves `fingerprint`.
    Confirmed { fingerprint: String },
    /// A new certificate was issued, installed and confirmed.
    Renewed { fingerprint: String },
    /// Another controller holds the node's renewal lock, or changed its certificates since the
    /// poll read them: the next poll looks again.
    Busy,
}

/// Node `node`'s renewal lock, held on a pooled connection of its own until dropped.
struct RenewalLock {
    conn: Option<crate::db::DbConn>,
    node: String,
}

impl RenewalLock {
    /// The lock, or `None` when another controller holds it.
    async fn take(ctl: &Controller, node: &str) -> ActionResult<Option<RenewalLock>> {
        let (pool, name) = (ctl.pool.clone(), node.to_string());
        tokio::task::spawn_blocking(move || {
            let mut conn = pool.get()?;
            Ok(
                coordination::try_lock_renewal(&mut conn, &name)?.then_some(RenewalLock {
                    conn: Some(conn),
                    node: name,
                }),
            )
        })
        .await
        .map_err(|e| ActionError::Internal(e.to_string()))?
    }
}

impl Drop for RenewalLock {
    fn drop(&mut self) {
        let (Some(mut conn), node) = (self.conn.take(), std::mem::take(&mut self.node)) else {
            return;
        };
        // Unlocked before the connection goes back to the pool.
        tokio::task::spawn_blocking(move || {
            if let Err(e) = coordination::unlock_renewal(&mut conn, &node) {
                tracing::warn!(node, error = %e, "releasing the renewal lock failed");
            }
        });
    }
}

/// Whether a certificate issued at `issued` and valid until `not_after` is at two thirds of its
/// life at `now`.
pub fn due(issued: DateTime<Utc>, not_after: DateTime<Utc>, now: DateTime<Utc>) -> bool {
    let life = not_after - issued;
    now >= issued + life * 2 / 3
}

/// Settles an unconfirmed renewal, then renews the node's certificate if it is due. `live` is the
/// node's live certificates as the poll that reached `agent` read them.
pub async fn check(
    ctl: &Controller,
    node: &str,
    live: Vec<NodeCertificate>,
    agent: &dyn NodeAgent,
) -> ActionResult<Renewal> {
    let Some(_lock) = RenewalLock::take(ctl, node).await? else {
        return Ok(Renewal::Busy);
    };
    let name = node.to_string();
    let now_live = ctl
        .db(move |conn| Ok(NodeCertificate::live(conn, &name)?))
        .await?;
    let prints = |certs: &[NodeCertificate]| {
        let mut p: Vec<String> = certs.iter().map(|c| c.fingerprint.clone()).collect();
        p.sort();
        p
    };
    if prints(&now_live) != prints(&live) {
        return Ok(Renewal::Busy);
    }
    let mut outcome = Renewal::NotDue;
    let current = if live.len() > 1 {
        let served = agent
            .identity()
            .await
            .map_err(ActionError::on_node(node))?
            .fingerprint;
        let Some(current) = live.iter().find(|c| c.fingerprint == served).cloned() else {
            return Err(ActionError::Internal(format!(
                "node {node} serves certificate {served}, which is none of its live ones"
            )));
        };
        confirm(ctl, node, &served, AuditAction::NodeCertificateConfirmed).await?;
        outcome = Renewal::Confirmed {
            fingerprint: served,
        };
        current
    } else if let Some(only) = live.into_iter().next() {
        only
    } else {
        return Ok(outcome);
    };
    if !due(current.issued_at, current.not_after, Utc::now()) {
        return Ok(outcome);
    }

    let csr = agent
        .identity_csr()
        .await
        .map_err(ActionError::on_node(node))?;
    let (pki, life) = (ctl.pki.clone(), ctl.node_cert_lifetime());
    let issued = pki.renew_node_certificate(&csr.csr_pem, node, &current.certificate_pem, life)?;
    let (name, pem, fp, not_after) = (
        node.to_string(),
        issued.pem.clone(),
        issued.fingerprint.clone(),
        issued.not_after,
    );
    // Pinned beside the current one before the agent has it: whichever it serves next is good.
    ctl.db(move |conn| {
        NodeCertificate::insert(conn, &name, &fp, &pem, not_after)?;
        Ok(())
    })
    .await?;
    let installed = agent
        .install_certificate(InstallCertificate {
            certificate_pem: issued.pem,
        })
        .await
        .map_err(ActionError::on_node(node))?;
    if installed.fingerprint != issued.fingerprint {
        return Err(ActionError::Internal(format!(
            "node {node} installed certificate {}, not the {} it was given",
            installed.fingerprint, issued.fingerprint
        )));
    }
    confirm(
        ctl,
        node,
        &issued.fingerprint,
        AuditAction::NodeCertificateRenewed,
    )
    .await?;
    tracing::info!(node, fingerprint = %issued.fingerprint, not_after = %issued.not_after, "renewed the node's certificate");
    Ok(Renewal::Renewed {
        fingerprint: issued.fingerprint,
    })
}

/// Revokes every live certificate of `node` but `fingerprint`, and audits it.
async fn confirm(
    ctl: &Controller,
    node: &str,
    fingerprint: &str,
    action: AuditAction,
) -> ActionResult<()> {
    let (node, fingerprint) = (node.to_string(), fingerprint.to_string());
    ctl.db(move |conn| {
        let revoked = NodeCertificate::revoke_others(conn, &node, &fingerprint)?;
        audit::record(
            conn,
            "poller",
            action,
            AuditObject::Node,
            &node,
            json!({"fingerprint": fingerprint, "revoked": revoked}),
        )?;
        Ok(())
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_is_due_at_two_thirds_of_its_life() {
        let issued = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let not_after = issued + chrono::Duration::days(300);
        assert!(!due(issued, not_after, issued));
        assert!(!due(
            issued,
            not_after,
            issued + chrono::Duration::days(199)
        ));
        assert!(due(issued, not_after, issued + chrono::Duration::days(200)));
        assert!(due(
            issued,
            not_after,
            not_after + chrono::Duration::days(1)
        ));
    }
}
