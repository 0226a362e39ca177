//! `TestDb`: one PostgreSQL database per test, cloned from a template migrated once per test
//! process, dropped on `Drop`; databases left by crashed processes are dropped at first use.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use diesel::prelude::*;
use diesel::sql_types::Text;

/// Admin connection URL (a role with CREATEDB). `scripts/setup` creates this one.
pub fn admin_url() -> String {
    std::env::var("COHORT_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://cohort:cohort@127.0.0.1:5432/cohort".to_string())
}

fn url_for(db: &str) -> String {
    let admin = admin_url();
    let base = admin.rsplit_once('/').map_or(admin.as_str(), |(b, _)| b);
    format!("{base}/{db}")
}

fn admin() -> PgConnection {
    PgConnection::establish(&admin_url()).unwrap_or_else(|e| {
        panic!(
            "PostgreSQL is not reachable at {} ({e}); run scripts/setup",
            admin_url()
        )
    })
}

#[derive(QueryableByName)]
struct Name {
    #[diesel(sql_type = Text)]
    datname: String,
}

fn drop_leftovers(conn: &mut PgConnection) {
    let names: Vec<Name> = diesel::sql_query(
        "SELECT datname FROM pg_database WHERE datname LIKE 'cohort\\_test\\_%' \
         OR datname LIKE 'cohort\\_tpl\\_%'",
    )
    .load(conn)
    .expect("list test databases");
    for Name { datname } in names {
        let pid = datname
            .split('_')
            .nth(2)
            .and_then(|p| p.parse::<u32>().ok());
        // Another process's leftover is not this test's to fail on: if it cannot go yet, the
        // next process to start tries again.
        if pid.is_some_and(crate::pid_is_dead) {
            if let Err(e) = drop_database(conn, &datname) {
                eprintln!("left database {datname} for later: {e}");
            }
        }
    }
}

/// How long a refused `DROP DATABASE` is retried.
const DROP_PATIENCE: Duration = Duration::from_secs(15);

/// Drops a database and ends the sessions in it.
///
/// `WITH (FORCE)` ends only sessions the caller may signal. The harness's role has CREATEDB and
/// nothing more, so PostgreSQL refuses while a session of another role is in the database. An
/// autovacuum worker is such a session: it carries no role, so no role but a superuser or a
/// member of `pg_signal_backend` may end it. Its pass takes moments, so a refusal is retried
/// until the database is free or `DROP_PATIENCE` runs out.
pub fn drop_database(conn: &mut PgConnection, name: &str) -> QueryResult<()> {
    let deadline = Instant::now() + DROP_PATIENCE;
    loop {
        match diesel::sql_query(format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
            .execute(conn)
        {
            Ok(_) => return Ok(()),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// The per-process template database, migrated once.
fn template() -> &'static str {
    static TEMPLATE: OnceLock<String> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let mut conn = admin();
        drop_leftovers(&mut conn);
        let name = format!("cohort_tpl_{}", std::process::id());
        drop_database(&mut conn, &name).unwrap_or_else(|e| panic!("drop database {name}: {e}"));
        diesel::sql_query(format!("CREATE DATABASE \"{name}\""))
            .execute(&mut conn)
            .expect("create template database");
        let mut tpl = PgConnection::establish(&url_for(&name)).expect("connect to template");
        cohort_controller::db::run_migrations(&mut tpl).expect("migrate template");
        name
    })
}

/// A fresh, migrated database for one test. Dropped (with any open connections) on `Drop`.
pub struct TestDb {
    name: String,
    url: String,
    /// Ends the test binary should the test outlive [`crate::process::TEST_LIMIT`].
    _watchdog: crate::process::Watchdog,
}

impl TestDb {
    pub fn new() -> Self {
        let template = template();
        let name = format!("cohort_test_{}", crate::unique_suffix().replace('-', "_"));
        let mut conn = admin();
        diesel::sql_query(format!(
            "CREATE DATABASE \"{name}\" TEMPLATE \"{template}\""
        ))
        .execute(&mut conn)
        .unwrap_or_else(|e| panic!("create {name} from {template}: {e}"));
        let url = url_for(&name);
        TestDb {
            name,
            url,
            _watchdog: crate::process::Watchdog::arm(),
        }
    }

    /// An empty database with no migrations applied (for migration tests).
    pub fn empty() -> Self {
        let mut conn = admin();
        drop_leftovers(&mut conn);
        let name = format!("cohort_test_{}", crate::unique_suffix().replace('-', "_"));
        diesel::sql_query(format!("CREATE DATABASE \"{name}\""))
            .execute(&mut conn)
            .unwrap_or_else(|e| panic!("create {name}: {e}"));
        let url = url_for(&name);
        TestDb {
            name,
            url,
            _watchdog: crate::process::Watchdog::arm(),
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn connect(&self) -> PgConnection {
        PgConnection::establish(&self.url).expect("connect to test database")
    }

    /// Drops this database (ending its sessions) and creates it again empty, under the same
    /// name: a controller's database destroyed and replaced by a fresh one.
    pub fn recreate_empty(&self) {
        let mut conn = admin();
        drop_database(&mut conn, &self.name)
            .unwrap_or_else(|e| panic!("drop database {}: {e}", self.name));
        diesel::sql_query(format!("CREATE DATABASE \"{}\"", self.name))
            .execute(&mut conn)
            .unwrap_or_else(|e| panic!("create {}: {e}", self.name));
    }
}

impl Default for TestDb {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        // A database that cannot be dropped now is a leftover the next process drops.
        if let Ok(mut conn) = PgConnection::establish(&admin_url()) {
            if let Err(e) = drop_database(&mut conn, &self.name) {
                eprintln!("left database {} for later: {e}", self.name);
            }
        }
    }
}

/// Whether a database of this name exists (harness self-tests use it).
pub fn database_exists(name: &str) -> bool {
    let mut conn = admin();
    let rows: Vec<Name> = diesel::sql_query("SELECT datname FROM pg_database WHERE datname = $1")
        .bind::<Text, _>(name)
        .load(&mut conn)
        .expect("query pg_database");
    !rows.is_empty()
}
