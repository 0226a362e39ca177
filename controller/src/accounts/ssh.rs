//! A student's way into their container: the SSH access a container is made with (the owner's
//! keys or password, where sshd listens). Requests never push it: they record `apply_logins`
//! operations whose steps apply it to running containers ([`crate::jobs::logins`]).

use cohort_proto::agent::SshAccess;

use crate::db::models::instance::Instance;
use crate::db::models::node::Node;
use crate::db::models::ssh_key::SshKey;
use crate::db::models::user::User;

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
