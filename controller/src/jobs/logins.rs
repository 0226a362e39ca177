//! The agent calls that put an owner's login into a running container or take one out, for
//! the steps that change logins ([`super::access`]) and for the starts and moves that bring a
//! container back ([`super::state`], [`super::moves`]). What the login is comes from
//! [`crate::accounts::ssh::ssh_access`].

use crate::accounts::ssh::ssh_access;
use crate::agent_client::NodeAgent;
use crate::app::state::Controller;
use crate::db::models::instance::Instance;
use crate::db::models::node::Node;
use crate::db::models::ssh_key::SshKey;
use crate::db::models::user::User;
use crate::error::ActionError;

/// Empties the user's authorized_keys and locks their password: what is left of an account an
/// admin disables or deletes. Setting a password again (`chpasswd -e`) unlocks.
const REVOKE_LOGIN: &str = r#"h=$(getent passwd "$1" | cut -d: -f6) && [ -n "$h" ] && [ -f "$h/.ssh/authorized_keys" ] && : > "$h/.ssh/authorized_keys"; usermod -L "$1" 2>/dev/null; true"#;

/// Removes `username`'s way into one running instance (see [`REVOKE_LOGIN`]).
pub async fn revoke_login(
    agent: &dyn NodeAgent,
    node: &Node,
    instance: &str,
    username: &str,
) -> Result<(), ActionError> {
    let request = cohort_proto::agent::ExecRequest {
        timeout_s: Some(60),
        ..cohort_proto::agent::ExecRequest::new(vec![
            "/bin/sh".into(),
            "-c".into(),
            REVOKE_LOGIN.into(),
            "cohort-revoke".into(),
            username.to_string(),
        ])
    };
    agent
        .exec(instance.to_string(), request)
        .await
        .map_err(ActionError::on_node(&node.name))?;
    Ok(())
}

/// Applies the owner's current keys (or password) to one running instance on its node.
pub async fn push_ssh(ctl: &Controller, instance: &Instance) -> Result<(), ActionError> {
    let Some(node_id) = instance.node_id else {
        return Ok(());
    };
    if instance.ssh_port.is_none() {
        return Ok(());
    }
    let owner_id = instance.owner_id;
    let (owner, keys) = ctl
        .db(move |conn| {
            Ok((
                User::find(conn, owner_id)?,
                SshKey::for_user(conn, owner_id)?,
            ))
        })
        .await?;
    let (node, agent) = ctl.agent_by_node_id(node_id).await?;
    match ssh_access(&owner, &keys, instance, &node) {
        Some(_) if owner.is_disabled() => {
            revoke_login(agent.as_ref(), &node, &instance.name, &owner.username).await?
        }
        Some(access) => {
            agent
                .set_ssh(instance.name.clone(), access)
                .await
                .map_err(ActionError::on_node(&node.name))?;
        }
        None => {}
    }
    Ok(())
}
