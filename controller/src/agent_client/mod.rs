//! The controller's side of the agent API (`cohort_proto::agent`): mutual TLS with the
//! controller's client certificate, the agent's server certificate checked against its pinned
//! fingerprints (its live certificates) and chained to the Cohort CA. [`NodeAgent`] is the seam unit tests fake.
//!
//! [`node_api`]: the trait and its types; [`error`]: what a call ends with; [`tls`]: the
//! connector and the pinned verifier; [`http`]: the client over HTTPS.

pub mod error;
pub mod http;
pub mod node_api;
pub mod tls;

pub use error::AgentError;
pub use node_api::{
    observed, AgentConnector, AgentFuture, AgentSocket, AgentStream, AgentTarget, FileDownload,
    FileMeta, NodeAgent, ReceivedTarball, Tunnel, TunnelIo,
};
pub use tls::MtlsConnector;
