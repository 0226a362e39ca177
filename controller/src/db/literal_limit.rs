//! `LIMIT n` written into a query's text rather than bound as a parameter.
//!
//! PostgreSQL plans a prepared statement for its parameters' values until a plan made without
//! them costs no more. A bound `LIMIT $n` never gets there: without the value the planner takes a
//! tenth of the table, which costs more than any real page, so it plans again on every call. For
//! the page of `GET /instances`, a join of six tables, planning cost more than running. With the
//! limit in the text the statement keeps one plan per connection.
//!
//! Each distinct limit is a distinct statement, so only limits that are multiples of
//! [`CACHED_STEP`] (plus one, for the look-ahead row) are kept prepared: any other is planned on
//! each call, and a client cycling through page sizes cannot fill every connection's statement
//! cache.

use diesel::pg::Pg;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::{QueryResult, RunQueryDsl};

/// Page sizes that are multiples of this keep a prepared statement.
pub const CACHED_STEP: u32 = 100;

/// `query LIMIT limit`, the limit literal. Build it with [`LiteralLimitDsl::literal_limit`].
#[derive(Debug, Clone)]
pub struct LiteralLimit<Q> {
    query: Q,
    limit: u32,
}

pub trait LiteralLimitDsl: Sized {
    /// At most `limit` rows, the limit written into the statement's text.
    fn literal_limit(self, limit: u32) -> LiteralLimit<Self> {
        LiteralLimit { query: self, limit }
    }
}

impl<Q: Query> LiteralLimitDsl for Q {}

impl<Q: Query> Query for LiteralLimit<Q> {
    type SqlType = Q::SqlType;
}

/// The text depends on the value, so the statement cache must key it by its text, never by type.
impl<Q> QueryId for LiteralLimit<Q> {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl<Q, Conn> RunQueryDsl<Conn> for LiteralLimit<Q> {}

impl<Q: QueryFragment<Pg>> QueryFragment<Pg> for LiteralLimit<Q> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        if self.limit % CACHED_STEP != 1 {
            out.unsafe_to_cache_prepared();
        }
        self.query.walk_ast(out.reborrow())?;
        out.push_sql(" LIMIT ");
        out.push_sql(&self.limit.to_string());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use diesel::debug_query;
    use diesel::prelude::*;

    use super::*;
    use crate::db::schema::instances;

    #[test]
    fn the_limit_is_written_after_the_query_with_its_binds_untouched() {
        let q = instances::table
            .select(instances::id)
            .filter(instances::name.gt("b"))
            .order(instances::name)
            .into_boxed()
            .literal_limit(101);
        let sql = debug_query::<Pg, _>(&q).to_string();
        assert!(
            sql.starts_with(
                "SELECT \"instances\".\"id\" FROM \"instances\" WHERE (\"instances\".\"name\" > $1) \
                 ORDER BY \"instances\".\"name\" LIMIT 101"
            ),
            "{sql}"
        );
        assert!(sql.ends_with("-- binds: [\"b\"]"), "{sql}");
    }

    #[test]
    fn only_pages_of_whole_hundreds_keep_a_prepared_statement() {
        let page = |limit| {
            instances::table
                .select(instances::id)
                .into_boxed()
                .literal_limit(limit)
                .is_safe_to_cache_prepared(&Pg)
                .expect("walk the query")
        };
        assert!(page(101));
        assert!(page(1001));
        assert!(!page(100));
        assert!(!page(38));
    }
}
