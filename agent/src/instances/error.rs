//! What can go wrong with an instance request; the API maps each variant to one HTTP status.

use crate::lxd::LxdError;

#[derive(Debug, thiserror::Error)]
pub enum InstanceError {
    /// the request broke a rule (400, naming the field)
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    /// the named thing does not exist (404)
    #[error("{message}")]
    NotFound {
        field: Option<String>,
        message: String,
    },
    /// the instance exists with another idempotency key or spec (409)
    #[error("{0}")]
    Conflict(String),
    /// sshd never answered on the forwarded port (504)
    #[error("sshd in {instance} did not answer on {address} within {seconds}s")]
    SshNotReady {
        instance: String,
        address: String,
        seconds: u64,
    },
    /// the daemon still creates the instance after the agent's wait (503 `creating`): asked
    /// again, the agent waits on the same create
    #[error(
        "LXD is still creating instance {instance} after {seconds}s; ask again to wait for it"
    )]
    StillCreating { instance: String, seconds: u64 },
    /// the command ran past its timeout (504)
    #[error("command in {instance} did not finish within {seconds}s")]
    ExecTimeout { instance: String, seconds: u64 },
    /// a file or an exec's output is larger than the caller's limit (413, naming it)
    #[error("{field} is {size} bytes, larger than the limit of {limit} bytes")]
    TooLarge {
        field: String,
        size: u64,
        limit: u64,
    },
    /// LXD refused or failed (its message inside)
    #[error(transparent)]
    Lxd(#[from] LxdError),
    /// the node network failed (503 when it is full)
    #[error(transparent)]
    Network(crate::network::NetworkError),
    /// the agent itself failed (500): the host's random source, say
    #[error("{0}")]
    Internal(String),
}

/// The network's errors at the instances boundary: a policy that broke a rule is the request's
/// 400, like any other field; the rest stay network errors.
impl From<crate::network::NetworkError> for InstanceError {
    fn from(e: crate::network::NetworkError) -> Self {
        match e {
            crate::network::NetworkError::Invalid { field, message } => {
                InstanceError::Invalid { field, message }
            }
            e => InstanceError::Network(e),
        }
    }
}

impl InstanceError {
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        InstanceError::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }

    /// A 404 for instance `name`, keeping LXD's message.
    pub fn instance_missing(name: &str, lxd: &LxdError) -> Self {
        InstanceError::NotFound {
            field: None,
            message: format!(
                "instance {name} not found (LXD: {})",
                lxd.lxd_message().unwrap_or("not found")
            ),
        }
    }
}
