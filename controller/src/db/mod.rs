//! The PostgreSQL inventory: embedded migrations, the connection pool and the generated schema.

pub mod literal_limit;
pub mod schema;
pub mod url;

use diesel::pg::PgConnection;
use diesel::r2d2::{ConnectionManager, Pool, PooledConnection};
use diesel_migrations::{embed_migrations, EmbeddedMigrations, MigrationHarness};

/// The shared connection pool; diesel is synchronous, so callers run queries on blocking threads.
pub type DbPool = Pool<ConnectionManager<PgConnection>>;
pub type DbConn = PooledConnection<ConnectionManager<PgConnection>>;

/// Opens a pool of at most `size` connections to `url`, opened as needed (PostgreSQL's
/// connection limit is shared by every controller process and test); on loopback without TLS
/// unless the URL asks for it ([`url::without_loopback_tls`]).
pub fn pool(url: &str, size: u32) -> Result<DbPool, diesel::r2d2::PoolError> {
    let url = url::without_loopback_tls(url, &url::LibpqEnv::from_process());
    Pool::builder()
        .max_size(size)
        .min_idle(Some(1))
        .connection_timeout(std::time::Duration::from_secs(10))
        .build(ConnectionManager::new(url))
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
