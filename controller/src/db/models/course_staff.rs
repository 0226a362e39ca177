//! `course_staff`: the other instructors and teaching assistants of a course. Who teaches a
//! course (its instructor or its staff) is answered here, once: [`teaches`] for one course and
//! [`taught_by`] as a filter on `courses` for lists.

use diesel::dsl;
use diesel::prelude::*;

use crate::db::schema::{course_staff, courses, users};

/// The ids of the courses `user` is staff of, as a subquery.
type StaffCourses = dsl::Select<
    dsl::Filter<course_staff::table, dsl::Eq<course_staff::user_id, i64>>,
    course_staff::course_id,
>;

/// The `courses` rows `user` teaches: theirs, or those they are staff of.
pub type TaughtBy =
    dsl::Or<dsl::Eq<courses::instructor_id, i64>, dsl::EqAny<courses::id, StaffCourses>>;

/// A filter on `courses` (alone or joined) keeping the courses `user` teaches.
pub fn taught_by(user: i64) -> TaughtBy {
    let staff: StaffCourses = course_staff::table
        .filter(course_staff::user_id.eq(user))
        .select(course_staff::course_id);
    courses::instructor_id
        .eq(user)
        .or(courses::id.eq_any(staff))
}

/// Whether `user` teaches course `course_id` (its instructor or staff).
pub fn teaches(conn: &mut PgConnection, course_id: i64, user: i64) -> QueryResult<bool> {
    diesel::select(dsl::exists(
        courses::table
            .filter(courses::id.eq(course_id))
            .filter(taught_by(user)),
    ))
    .get_result(conn)
}

/// Whether `user` is on course `course_id`'s staff (not its instructor).
pub fn is_staff(conn: &mut PgConnection, course_id: i64, user: i64) -> QueryResult<bool> {
    diesel::select(dsl::exists(
        course_staff::table
            .filter(course_staff::course_id.eq(course_id))
            .filter(course_staff::user_id.eq(user)),
    ))
    .get_result(conn)
}

/// Adds `user` to the staff; `false` if they already were.
pub fn add(conn: &mut PgConnection, course_id: i64, user: i64) -> QueryResult<bool> {
    let n = diesel::insert_into(course_staff::table)
        .values((
            course_staff::course_id.eq(course_id),
            course_staff::user_id.eq(user),
        ))
        .on_conflict_do_nothing()
        .execute(conn)?;
    Ok(n == 1)
}

/// Removes `user` from the staff; `false` if they were not on it.
pub fn remove(conn: &mut PgConnection, course_id: i64, user: i64) -> QueryResult<bool> {
    let n = diesel::delete(
        course_staff::table
            .filter(course_staff::course_id.eq(course_id))
            .filter(course_staff::user_id.eq(user)),
    )
    .execute(conn)?;
    Ok(n == 1)
}

/// The staff's usernames, sorted.
pub fn usernames(conn: &mut PgConnection, course_id: i64) -> QueryResult<Vec<String>> {
    course_staff::table
        .inner_join(users::table)
        .filter(course_staff::course_id.eq(course_id))
        .order(users::username)
        .select(users::username)
        .load(conn)
}

/// The staff's account ids (what a copied course takes over).
pub fn user_ids(conn: &mut PgConnection, course_id: i64) -> QueryResult<Vec<i64>> {
    course_staff::table
        .filter(course_staff::course_id.eq(course_id))
        .select(course_staff::user_id)
        .load(conn)
}
