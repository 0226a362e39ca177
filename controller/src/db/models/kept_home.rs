//! `kept_homes`: the node that holds a home volume kept without its container (a teardown that
//! kept homes, a student removed without `--delete-home`), so placement puts the next container
//! of that name where its home is (`crate::placement`).

use diesel::prelude::*;

use crate::db::schema::{kept_homes, nodes};

pub struct KeptHome;

impl KeptHome {
    /// Records that `instance`'s home stays on `node_id` without its container.
    pub fn record(
        conn: &mut PgConnection,
        instance: &str,
        node_id: i64,
        course_id: Option<i64>,
    ) -> QueryResult<()> {
        diesel::insert_into(kept_homes::table)
            .values((
                kept_homes::instance_name.eq(instance),
                kept_homes::node_id.eq(node_id),
                kept_homes::course_id.eq(course_id),
            ))
            .on_conflict(kept_homes::instance_name)
            .do_update()
            .set((
                kept_homes::node_id.eq(node_id),
                kept_homes::course_id.eq(course_id),
                kept_homes::kept_at.eq(diesel::dsl::now),
            ))
            .execute(conn)
            .map(drop)
    }

    /// The node holding `instance`'s kept home, with its name, if one does.
    pub fn node_of(conn: &mut PgConnection, instance: &str) -> QueryResult<Option<(i64, String)>> {
        kept_homes::table
            .inner_join(nodes::table)
            .filter(kept_homes::instance_name.eq(instance))
            .select((nodes::id, nodes::name))
            .first(conn)
            .optional()
    }

    /// Whether any of `names` has a kept home somewhere.
    pub fn any_of(conn: &mut PgConnection, names: &[&str]) -> QueryResult<bool> {
        diesel::select(diesel::dsl::exists(
            kept_homes::table.filter(kept_homes::instance_name.eq_any(names)),
        ))
        .get_result(conn)
    }

    /// Forgets `instance`'s kept home: deleted, or in use by a container of that name again.
    pub fn forget(conn: &mut PgConnection, instance: &str) -> QueryResult<()> {
        diesel::delete(kept_homes::table.filter(kept_homes::instance_name.eq(instance)))
            .execute(conn)
            .map(drop)
    }
}
