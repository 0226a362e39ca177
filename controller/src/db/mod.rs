//! The PostgreSQL inventory: embedded migrations, the connection pool and the generated schema,
//! the row types and their queries ([`models`]), the queries that span tables or serve one
//! feature ([`queries`]), the enums stored by name ([`enums`]), and the only place that names a
//! table (`scripts/check-rules` holds every other module to that).

pub mod enums;
pub mod literal_limit;
pub mod models;
pub mod queries;
pub mod schema;
pub mod url;

use diesel::pg::PgConnection;
use diesel::prelude::*;
use diesel::r2d2::{ConnectionManager, CustomizeConnection, Pool, PooledConnection};
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
        .connection_customizer(Box::new(Named))
        .build(ConnectionManager::new(url))
}

/// The `application_name` of every pooled connection, so `pg_stat_activity` (and
/// `cohort-controller migrate`, which refuses to change the schema under a running controller)
/// can tell a controller's sessions from others.
pub const APPLICATION_NAME: &str = concat!("cohort-controller ", env!("CARGO_PKG_VERSION"));

#[derive(Debug)]
struct Named;

impl CustomizeConnection<PgConnection, diesel::r2d2::Error> for Named {
    fn on_acquire(&self, conn: &mut PgConnection) -> Result<(), diesel::r2d2::Error> {
        diesel::sql_query(format!("SET application_name = '{APPLICATION_NAME}'"))
            .execute(conn)
            .map(|_| ())
            .map_err(diesel::r2d2::Error::QueryError)
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
