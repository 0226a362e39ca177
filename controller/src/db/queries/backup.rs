//! What a backup and a restore ask the database itself: the schema version a dump carries, and
//! whether the database a restore goes into is empty (`crate::app::backup` does the rest).

use diesel::prelude::*;

#[derive(QueryableByName)]
struct Version {
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    version: Option<String>,
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

/// The newest migration applied (`None` on a database without any).
pub fn schema_version(conn: &mut PgConnection) -> QueryResult<Option<String>> {
    diesel::sql_query("SELECT max(version) AS version FROM __diesel_schema_migrations")
        .get_result::<Version>(conn)
        .map(|v| v.version)
}

/// How many tables the `public` schema has.
pub fn public_tables(conn: &mut PgConnection) -> QueryResult<i64> {
    diesel::sql_query(
        "SELECT count(*) AS n FROM information_schema.tables WHERE table_schema = 'public'",
    )
    .get_result::<Count>(conn)
    .map(|c| c.n)
}
