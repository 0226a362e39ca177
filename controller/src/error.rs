//! The error every action of the library returns; `crate::http::api::error` maps each variant to one
//! HTTP status and the one JSON error shape.

use crate::agent_client::AgentError;

#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    /// the request is malformed; `field` names the part at fault
    #[error("{message}")]
    Invalid { field: String, message: String },
    /// a body or an answer is larger than its limit; `field` names it
    #[error("{field} is larger than the limit of {limit} bytes")]
    TooLarge { field: String, limit: usize },
    /// no valid bearer token or credential
    #[error("{0}")]
    Unauthenticated(String),
    /// this source failed to authenticate too often; heard again after `retry_after_s`
    #[error("too many failed authentications from this address; retry in {retry_after_s} s")]
    Throttled { retry_after_s: u64 },
    /// the caller's role or ownership does not allow this
    #[error("{0}")]
    Forbidden(String),
    /// the named object does not exist (or is not visible to the caller)
    #[error("{0} not found")]
    NotFound(String),
    /// the object a request field names does not exist; `field` names it
    #[error("{what} not found")]
    Missing { field: String, what: String },
    /// the request conflicts with the current state
    #[error("{message}")]
    Conflict {
        field: Option<String>,
        message: String,
    },
    /// nothing can hold the instance now and queueing was not asked for
    #[error("{0}")]
    NoCapacity(String),
    /// the node's agent failed or could not be reached
    #[error("node {node}: {source}")]
    Agent { node: String, source: AgentError },
    /// the database failed
    #[error("database error: {0}")]
    Database(#[from] diesel::result::Error),
    /// no database connection could be had
    #[error("database unavailable: {0}")]
    Pool(#[from] diesel::r2d2::PoolError),
    /// certificate work failed
    #[error(transparent)]
    Pki(#[from] crate::nodes::pki::PkiError),
    /// a background task failed unexpectedly
    #[error("internal error: {0}")]
    Internal(String),
    /// the university's directory (LDAP) could not be asked
    #[error(transparent)]
    Directory(#[from] crate::accounts::directory::DirectoryError),
    /// the image store on disk failed
    #[error("image store: {0}")]
    Io(#[from] std::io::Error),
}

impl ActionError {
    /// What a failed call to `node`'s agent becomes: `.map_err(ActionError::on_node(name))`.
    pub fn on_node(node: impl Into<String>) -> impl FnOnce(AgentError) -> ActionError {
        let node = node.into();
        move |source| ActionError::Agent { node, source }
    }

    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        ActionError::Invalid {
            field: field.to_string(),
            message: message.into(),
        }
    }

    pub fn conflict(field: Option<&str>, message: impl Into<String>) -> Self {
        ActionError::Conflict {
            field: field.map(String::from),
            message: message.into(),
        }
    }

    /// Why the database cannot do this now though the request was fine (out of disk space, a
    /// lock or statement timeout, a lost session, deadlocks past every retry): answered 503 with
    /// these words; `None` for any other error.
    pub fn database_unavailable(&self) -> Option<&'static str> {
        match self {
            ActionError::Database(e) => crate::db::unavailable(e),
            _ => None,
        }
    }

    /// Maps a unique-key violation on a known constraint to a conflict naming the field.
    pub fn from_unique(err: diesel::result::Error, field: &str, message: &str) -> Self {
        use diesel::result::{DatabaseErrorKind, Error};
        match err {
            Error::DatabaseError(DatabaseErrorKind::UniqueViolation, _) => {
                ActionError::conflict(Some(field), message)
            }
            other => ActionError::Database(other),
        }
    }

    /// Like [`ActionError::from_unique`] for a statement that writes more than one table: only a
    /// violation of `constraint` is the caller's conflict, any other stays a database error.
    pub fn from_unique_on(
        err: diesel::result::Error,
        constraint: &str,
        field: &str,
        message: &str,
    ) -> Self {
        use diesel::result::{DatabaseErrorKind, Error};
        match err {
            Error::DatabaseError(DatabaseErrorKind::UniqueViolation, ref info)
                if info.constraint_name() == Some(constraint) =>
            {
                ActionError::conflict(Some(field), message)
            }
            other => ActionError::Database(other),
        }
    }
}

pub type ActionResult<T> = Result<T, ActionError>;
