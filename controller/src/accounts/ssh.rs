//! A student's way into their container, applied by the controller through the node's agent:
//! the SSH access a new container is made with, the owner's current keys (or password) pushed
//! to a running one, and a disabled or deleted owner's login taken away. Requests do not push
//! them: they record `apply_logins` operations whose steps call these
//! ([`crate::jobs::access`]).

use cohort_proto::agent::SshAccess;

use crate::agent_client::NodeAgent;
use crate::app::state::Controller;
use crate::db::models::instance::Instance;
use crate::db::models::node::Node;
use crate::db::models::ssh_key::SshKey;
use crate::db::models::user::User;
use crate::error::ActionError;

/// The address the SSH proxy device listens on: the node's SSH host when it is an address.
fn listen_address(ssh_host: &str) -> String {
    match ssh_host.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.to_string(),
        Err(_) => "0.0.0.0".to_string(),
    }
}

/// The owner's way into the instance. An owner with neither a key nor a password still gets
/// their user (and home) with no way in: nothing is open until they add a key, which then
/// reaches the running container at once.
pub fn ssh_access(
    owner: &User,
    keys: &[SshKey],
    instance: &Instance,
    node: &Node,
) -> Option<SshAccess> {
    // A disabled owner gets the user with no way in (no key, no password) in a new container;
    // in a running one `push_ssh` removes their login instead.
    let disabled = owner.is_disabled();
    instance.ssh_port.map(|port| SshAccess {
        username: owner.username.clone(),
        authorized_keys: if disabled {
            Vec::new()
        } else {
            keys.iter().map(|k| k.public_key.clone()).collect()
        },
        password_hash: owner.password_hash.clone().filter(|_| !disabled),
        sudo: true,
        listen_address: listen_address(&node.ssh_host),
        port: port as u16,
    })
}

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
        command: vec![
            "/bin/sh".into(),
            "-c".into(),
            REVOKE_LOGIN.into(),
            "cohort-revoke".into(),
            username.to_string(),
        ],
        environment: Default::default(),
        user: None,
        group: None,
        cwd: None,
        stdin_base64: None,
        timeout_s: Some(60),
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
