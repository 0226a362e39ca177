//! The errors a call to an agent ends with, and whether retrying can help.

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// the agent could not be reached or the TLS handshake failed
    #[error("unreachable: {0}")]
    Unreachable(String),
    /// the agent answered with an error
    #[error("agent answered {status}: {message}")]
    Status {
        status: u16,
        code: String,
        message: String,
        field: Option<String>,
    },
    /// the agent's answer did not decode
    #[error("unexpected answer: {0}")]
    Decode(String),
    /// the TLS client could not be built
    #[error("tls setup: {0}")]
    Tls(String),
    /// the controller knows the node is offline and did not call it (a call would only wait
    /// out its deadline); tried again once the poller hears from the node
    #[error("offline: {0}")]
    Offline(String),
}

impl AgentError {
    /// True when retrying cannot help (the agent refused the request itself).
    pub fn is_permanent(&self) -> bool {
        matches!(self, AgentError::Status { status, .. } if (400..500).contains(status) && *status != 408 && *status != 429)
    }
}
