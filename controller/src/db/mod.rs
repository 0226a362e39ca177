//! The PostgreSQL inventory: embedded migrations, the connection pool and the generated schema,
//! the row types and their queries ([`models`]), the queries that span tables or serve one
//! feature ([`queries`]), the enums stored by name ([`enums`]), and the only place that names a
//! table (`scripts/check-rules` holds every other module to that).
//!
//! Every pooled session is bounded ([`SessionLimits`]): a statement, a wait for a lock and a
//! transaction left idle each have a timeout, and TCP keepalives find a database host that
//! vanished without a reset in about a minute instead of the kernel's 15. A peer that crashed
//! inside a transaction thus holds its locks for at most the idle-in-transaction timeout, and a
//! caller behind its lock gets an error within the lock timeout instead of waiting for it.
//!
//! Lock order. Every transaction that takes row locks on more than one of these tables takes
//! them in this order: `instances` (by id), then `nodes` (by id), then `gpus`. A delete, move or
//! resize locks its instance and the usage trigger then locks its node(s) (both nodes of a move
//! in id order, see the `lock_order` migration); the poller records a node's heartbeat, GPUs and
//! images in one transaction and its instances' states in another, never holding a node's row
//! while it waits for an instance's. What order cannot rule out (a statement PostgreSQL picks as
//! a deadlock's victim, a serialization failure) is retried by `Controller::db`
//! ([`retryable`]), the one place every query of the controller goes through.

pub mod enums;
pub mod literal_limit;
pub mod models;
pub mod queries;
pub mod schema;
pub mod url;

use diesel::connection::SimpleConnection;
use diesel::pg::PgConnection;
use diesel::prelude::*;
use diesel::r2d2::{ConnectionManager, CustomizeConnection, Pool, PooledConnection};
use diesel_migrations::{embed_migrations, EmbeddedMigrations, MigrationHarness};
use std::time::Duration;

/// The shared connection pool; diesel is synchronous, so callers run queries on blocking threads.
pub type DbPool = Pool<ConnectionManager<PgConnection>>;
pub type DbConn = PooledConnection<ConnectionManager<PgConnection>>;

/// Opens a pool of at most `size` connections to `url` with the default [`SessionLimits`] limits.
pub fn pool(url: &str, size: u32) -> Result<DbPool, diesel::r2d2::PoolError> {
    pool_with(url, size, &SessionLimits::default())
}

/// Opens a pool of at most `size` connections to `url`, opened as needed (PostgreSQL's
/// connection limit is shared by every controller process and test); on loopback without TLS
/// unless the URL asks for it ([`url::without_loopback_tls`]); each session bounded by
/// `session`, and a checkout waits at most `session.checkout_timeout`.
pub fn pool_with(
    url: &str,
    size: u32,
    session: &SessionLimits,
) -> Result<DbPool, diesel::r2d2::PoolError> {
    let url = url::without_loopback_tls(url, &url::LibpqEnv::from_process());
    let url = url::with_connection_params(&url, &session.libpq_params());
    Pool::builder()
        .max_size(size)
        .min_idle(Some(1))
        .connection_timeout(session.checkout_timeout)
        .connection_customizer(Box::new(Named(session.clone())))
        .build(ConnectionManager::new(url))
}

/// The limits of every pooled connection (`database.*` in the configuration, documented in
/// `docs/configuration.md`). A zero timeout is PostgreSQL's "none".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionLimits {
    /// `statement_timeout`: the longest one statement may run. Default 60 s: the controller's
    /// statements take milliseconds; a minute only stops one that can never end.
    pub statement_timeout: Duration,
    /// `lock_timeout`: the longest a statement waits for a row or table lock. Default 10 s.
    pub lock_timeout: Duration,
    /// `idle_in_transaction_session_timeout`: a session idle inside a transaction this long is
    /// ended by the server, its locks freed. Default 60 s: the controller never waits on anything
    /// but the database inside a transaction.
    pub idle_in_transaction_timeout: Duration,
    /// libpq `connect_timeout`. Default 10 s.
    pub connect_timeout: Duration,
    /// libpq `keepalives_idle`, `keepalives_interval`, `keepalives_count`: a silent peer is
    /// declared dead after idle + interval * count. Defaults 30 s, 10 s, 3 (a minute).
    pub keepalives_idle: Duration,
    pub keepalives_interval: Duration,
    pub keepalives_count: u32,
    /// The longest a caller waits for a pooled connection. Default 10 s.
    pub checkout_timeout: Duration,
}

impl Default for SessionLimits {
    fn default() -> Self {
        SessionLimits {
            statement_timeout: Duration::from_secs(60),
            lock_timeout: Duration::from_secs(10),
            idle_in_transaction_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
            keepalives_idle: Duration::from_secs(30),
            keepalives_interval: Duration::from_secs(10),
            keepalives_count: 3,
            checkout_timeout: Duration::from_secs(10),
        }
    }
}

impl SessionLimits {
    /// The connection parameters libpq takes from the URL (a URL that names one keeps its own).
    fn libpq_params(&self) -> Vec<(&'static str, String)> {
        vec![
            (
                "connect_timeout",
                self.connect_timeout.as_secs().max(1).to_string(),
            ),
            ("keepalives", "1".into()),
            (
                "keepalives_idle",
                self.keepalives_idle.as_secs().max(1).to_string(),
            ),
            (
                "keepalives_interval",
                self.keepalives_interval.as_secs().max(1).to_string(),
            ),
            ("keepalives_count", self.keepalives_count.max(1).to_string()),
        ]
    }

    /// The `SET`s each new session runs.
    fn settings(&self) -> String {
        format!(
            "SET application_name = '{APPLICATION_NAME}'; SET statement_timeout = {}; \
             SET lock_timeout = {}; SET idle_in_transaction_session_timeout = {};",
            self.statement_timeout.as_millis(),
            self.lock_timeout.as_millis(),
            self.idle_in_transaction_timeout.as_millis()
        )
    }
}

/// The `application_name` of every pooled connection, so `pg_stat_activity` (and
/// `cohort-controller migrate`, which refuses to change the schema under a running controller)
/// can tell a controller's sessions from others.
pub const APPLICATION_NAME: &str = concat!("cohort-controller ", env!("CARGO_PKG_VERSION"));

/// Names each new session and sets its [`SessionLimits`] limits.
#[derive(Debug)]
struct Named(SessionLimits);

impl CustomizeConnection<PgConnection, diesel::r2d2::Error> for Named {
    fn on_acquire(&self, conn: &mut PgConnection) -> Result<(), diesel::r2d2::Error> {
        conn.batch_execute(&self.0.settings())
            .map_err(diesel::r2d2::Error::QueryError)
    }
}

/// What PostgreSQL reports when it ends a statement that was a deadlock's victim (SQLSTATE
/// 40P01). Diesel exposes no SQLSTATE but 40001's, so the message is matched: the server's
/// `lc_messages` must be English (`C` or `en_*`, the packages' default).
const DEADLOCK: &str = "deadlock detected";

/// Whether `err` is one a transaction may meet through no fault of its own and that running it
/// again settles: a serialization failure (40001) or a deadlock (40P01).
pub fn retryable(err: &diesel::result::Error) -> bool {
    use diesel::result::{DatabaseErrorKind, Error};
    match err {
        Error::DatabaseError(DatabaseErrorKind::SerializationFailure, _) => true,
        Error::DatabaseError(_, info) => info.message().starts_with(DEADLOCK),
        _ => false,
    }
}

/// Why the database cannot do the work now although the request was fine, in words a caller
/// can act on; `None` for any other error (a bug, a violated constraint). Such an error is
/// answered 503: the database is out of space, a lock or statement timed out, the session was
/// lost, or a deadlock persisted through every retry.
pub fn unavailable(err: &diesel::result::Error) -> Option<&'static str> {
    use diesel::result::{DatabaseErrorKind, Error};
    let Error::DatabaseError(kind, info) = err else {
        return None;
    };
    let message = info.message();
    if matches!(kind, DatabaseErrorKind::ClosedConnection) {
        Some("the connection to the database was lost; try again")
    } else if message.contains("No space left on device")
        || message.contains("could not extend file")
    {
        Some("the database is out of disk space; nothing was changed, try again once it has space")
    } else if message.contains("lock timeout") {
        Some("the data is locked by another session past the lock timeout; try again")
    } else if message.contains("statement timeout") {
        Some("the database did not answer within the statement timeout; try again")
    } else if message.contains("idle-in-transaction timeout")
        || message.contains("terminating connection")
    {
        Some("the database ended the session; try again")
    } else if retryable(err) {
        Some("the database kept meeting concurrent changes; try again")
    } else {
        None
    }
}

/// Asks the database something (`SELECT 1`): it answers or the error says why.
pub fn ping(conn: &mut PgConnection) -> QueryResult<usize> {
    diesel::sql_query("SELECT 1").execute(conn)
}

/// Another client's session in the same database, as `pg_stat_activity` shows it.
#[derive(Debug, QueryableByName)]
pub struct Session {
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pub pid: i32,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub application_name: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub client: String,
}

impl std::fmt::Display for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self.application_name.as_str() {
            "" => "(no application name)",
            name => name,
        };
        write!(f, "{name} from {} (server pid {})", self.client, self.pid)
    }
}

/// Every other client session in this connection's database (background workers such as
/// autovacuum are not clients and are left out).
pub fn other_sessions(conn: &mut PgConnection) -> QueryResult<Vec<Session>> {
    diesel::sql_query(
        "SELECT pid, coalesce(application_name, '') AS application_name, \
                CASE WHEN client_port = -1 THEN 'a local socket' \
                     WHEN client_addr IS NULL THEN 'an address this role may not see' \
                     ELSE host(client_addr) END AS client \
         FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid() \
           AND backend_type = 'client backend' \
         ORDER BY pid",
    )
    .load(conn)
}

pub const MIGRATIONS: EmbeddedMigrations = embed_migrations!("migrations");

/// Errors from running migrations (diesel's harness returns a boxed error).
#[derive(Debug, thiserror::Error)]
#[error("database migration failed: {0}")]
pub struct MigrationError(String);

/// Applies every pending migration; returns the versions applied.
pub fn run_migrations(conn: &mut PgConnection) -> Result<Vec<String>, MigrationError> {
    conn.run_pending_migrations(MIGRATIONS)
        .map(|v| v.iter().map(|m| m.to_string()).collect())
        .map_err(|e| MigrationError(e.to_string()))
}

/// The versions of the migrations this binary has that the database lacks.
pub fn pending_migrations(conn: &mut PgConnection) -> Result<Vec<String>, MigrationError> {
    conn.pending_migrations(MIGRATIONS)
        .map(|pending| {
            pending
                .iter()
                .map(|m| m.name().version().to_string())
                .collect()
        })
        .map_err(|e| MigrationError(e.to_string()))
}

/// Reverts every applied migration (used by the up/down/up test).
pub fn revert_all(conn: &mut PgConnection) -> Result<(), MigrationError> {
    conn.revert_all_migrations(MIGRATIONS)
        .map(|_| ())
        .map_err(|e| MigrationError(e.to_string()))
}
