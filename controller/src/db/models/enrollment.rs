//! `enrollments`: which students are in which course, and the generated first-login password
//! of a student who came without an SSH key, kept in clear only until the first export shows it
//! (the account keeps its crypt(3) hash).

use diesel::prelude::*;

use crate::db::models::user::User;
use crate::db::schema::{courses, enrollments, users};

/// A student of a course with their enrollment.
#[derive(Debug, Clone)]
pub struct Enrolled {
    pub user: User,
    pub initial_password: Option<String>,
}

pub struct Enrollment;

impl Enrollment {
    /// Enrolls a user; false when they already were.
    pub fn insert(
        conn: &mut PgConnection,
        course_id: i64,
        user_id: i64,
        initial_password: Option<&str>,
    ) -> QueryResult<bool> {
        diesel::insert_into(enrollments::table)
            .values((
                enrollments::course_id.eq(course_id),
                enrollments::user_id.eq(user_id),
                enrollments::initial_password.eq(initial_password),
            ))
            .on_conflict_do_nothing()
            .execute(conn)
            .map(|n| n == 1)
    }

    /// The course's students, by username.
    pub fn students(conn: &mut PgConnection, course_id: i64) -> QueryResult<Vec<Enrolled>> {
        let rows: Vec<(User, Option<String>)> = enrollments::table
            .inner_join(users::table)
            .filter(enrollments::course_id.eq(course_id))
            .select((User::as_select(), enrollments::initial_password))
            .order(users::username)
            .load(conn)?;
        Ok(rows
            .into_iter()
            .map(|(user, initial_password)| Enrolled {
                user,
                initial_password,
            })
            .collect())
    }

    /// Forgets the clear passwords of these students of the course, once an export showed them;
    /// returns how many there were.
    pub fn forget_passwords(
        conn: &mut PgConnection,
        course_id: i64,
        user_ids: &[i64],
    ) -> QueryResult<usize> {
        diesel::update(
            enrollments::table
                .filter(enrollments::course_id.eq(course_id))
                .filter(enrollments::user_id.eq_any(user_ids))
                .filter(enrollments::initial_password.is_not_null()),
        )
        .set(enrollments::initial_password.eq(None::<String>))
        .execute(conn)
    }

    pub fn count(conn: &mut PgConnection, course_id: i64) -> QueryResult<i64> {
        enrollments::table
            .filter(enrollments::course_id.eq(course_id))
            .count()
            .get_result(conn)
    }

    pub fn is_enrolled(conn: &mut PgConnection, course_id: i64, user_id: i64) -> QueryResult<bool> {
        diesel::select(diesel::dsl::exists(
            enrollments::table
                .filter(enrollments::course_id.eq(course_id))
                .filter(enrollments::user_id.eq(user_id)),
        ))
        .get_result(conn)
    }

    /// Whether `user_id` is enrolled in a course other than `course_id`.
    pub fn in_other_course(
        conn: &mut PgConnection,
        course_id: i64,
        user_id: i64,
    ) -> QueryResult<bool> {
        diesel::select(diesel::dsl::exists(
            enrollments::table
                .filter(enrollments::course_id.ne(course_id))
                .filter(enrollments::user_id.eq(user_id)),
        ))
        .get_result(conn)
    }

    /// Whether `user_id` is a student of any course `instructor_id` teaches.
    pub fn is_taught_by(
        conn: &mut PgConnection,
        user_id: i64,
        instructor_id: i64,
    ) -> QueryResult<bool> {
        diesel::select(diesel::dsl::exists(
            enrollments::table
                .inner_join(courses::table)
                .filter(enrollments::user_id.eq(user_id))
                .filter(crate::db::models::course_staff::taught_by(instructor_id)),
        ))
        .get_result(conn)
    }

    pub fn delete(conn: &mut PgConnection, course_id: i64, user_id: i64) -> QueryResult<usize> {
        diesel::delete(
            enrollments::table
                .filter(enrollments::course_id.eq(course_id))
                .filter(enrollments::user_id.eq(user_id)),
        )
        .execute(conn)
    }
}
