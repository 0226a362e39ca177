//! `course_archives`: each student's archived home of a course (a `.tar.gz` in the controller's
//! archive store), with its SHA-256, size and the time it expires; and `courses.archive_days`,
//! how long the course's archives are kept.

use chrono::{DateTime, Utc};
use diesel::prelude::*;

use crate::db::schema::{course_archives, courses, users};

#[derive(Debug, Clone, Queryable, Selectable, Identifiable)]
#[diesel(table_name = course_archives, check_for_backend(diesel::pg::Pg))]
pub struct CourseArchive {
    pub id: i64,
    pub course_id: i64,
    pub user_id: i64,
    pub path: String,
    pub sha256: String,
    pub size_bytes: i64,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

/// An archive with its course's code and its student's username.
#[derive(Debug, Clone)]
pub struct NamedArchive {
    pub archive: CourseArchive,
    pub course: String,
    pub user: String,
}

type Row = (CourseArchive, String, String);
type Joined = diesel::dsl::InnerJoin<
    diesel::dsl::InnerJoin<course_archives::table, courses::table>,
    users::table,
>;
type NamedColumns = (
    diesel::dsl::AsSelect<CourseArchive, diesel::pg::Pg>,
    courses::code,
    users::username,
);

fn named((archive, course, user): Row) -> NamedArchive {
    NamedArchive {
        archive,
        course,
        user,
    }
}

impl CourseArchive {
    /// The days course `course_id` keeps its archives; `None`: the controller's default.
    pub fn days_of(conn: &mut PgConnection, course_id: i64) -> QueryResult<Option<i32>> {
        courses::table
            .find(course_id)
            .select(courses::archive_days)
            .first(conn)
    }

    pub fn set_days_of(
        conn: &mut PgConnection,
        course_id: i64,
        days: Option<i32>,
    ) -> QueryResult<usize> {
        diesel::update(courses::table.find(course_id))
            .set(courses::archive_days.eq(days))
            .execute(conn)
    }

    /// Records a student's archive, replacing an earlier one; it expires `days` days from now
    /// by the database's clock. The path of the one it replaced, when that was another file.
    #[allow(clippy::too_many_arguments)]
    pub fn put(
        conn: &mut PgConnection,
        course_id: i64,
        user_id: i64,
        path: &str,
        sha256: &str,
        size_bytes: i64,
        days: i32,
    ) -> QueryResult<CourseArchive> {
        let expires = || {
            diesel::dsl::sql::<diesel::sql_types::Timestamptz>("now() + make_interval(days => ")
                .bind::<diesel::sql_types::Integer, _>(days)
                .sql(")")
        };
        diesel::insert_into(course_archives::table)
            .values((
                course_archives::course_id.eq(course_id),
                course_archives::user_id.eq(user_id),
                course_archives::path.eq(path),
                course_archives::sha256.eq(sha256),
                course_archives::size_bytes.eq(size_bytes),
                course_archives::expires_at.eq(expires()),
            ))
            .on_conflict((course_archives::course_id, course_archives::user_id))
            .do_update()
            .set((
                course_archives::path.eq(path),
                course_archives::sha256.eq(sha256),
                course_archives::size_bytes.eq(size_bytes),
                course_archives::created_at
                    .eq(diesel::dsl::sql::<diesel::sql_types::Timestamptz>("now()")),
                course_archives::expires_at.eq(expires()),
            ))
            .returning(CourseArchive::as_returning())
            .get_result(conn)
    }

    fn named() -> diesel::dsl::Select<Joined, NamedColumns> {
        course_archives::table
            .inner_join(courses::table)
            .inner_join(users::table)
            .select((CourseArchive::as_select(), courses::code, users::username))
    }

    /// The code of course `course_id` (an archiving teardown's items name only instances).
    pub fn course_code(conn: &mut PgConnection, course_id: i64) -> QueryResult<String> {
        courses::table
            .find(course_id)
            .select(courses::code)
            .first(conn)
    }

    /// The course's archives, by username.
    pub fn of_course(conn: &mut PgConnection, course_id: i64) -> QueryResult<Vec<NamedArchive>> {
        let rows: Vec<Row> = Self::named()
            .filter(course_archives::course_id.eq(course_id))
            .order(users::username)
            .load(conn)?;
        Ok(rows.into_iter().map(named).collect())
    }

    /// A student's archive of a course.
    pub fn find(
        conn: &mut PgConnection,
        course_id: i64,
        user_id: i64,
    ) -> QueryResult<Option<NamedArchive>> {
        let row: Option<Row> = Self::named()
            .filter(course_archives::course_id.eq(course_id))
            .filter(course_archives::user_id.eq(user_id))
            .first(conn)
            .optional()?;
        Ok(row.map(named))
    }

    /// A student's archives, of every course, newest first.
    pub fn of_user(conn: &mut PgConnection, user_id: i64) -> QueryResult<Vec<NamedArchive>> {
        let rows: Vec<Row> = Self::named()
            .filter(course_archives::user_id.eq(user_id))
            .order(course_archives::created_at.desc())
            .load(conn)?;
        Ok(rows.into_iter().map(named).collect())
    }

    /// Archives whose time is up by the database's clock.
    pub fn expired(conn: &mut PgConnection) -> QueryResult<Vec<NamedArchive>> {
        let rows: Vec<Row> = Self::named()
            .filter(course_archives::expires_at.le(diesel::dsl::now))
            .order(course_archives::id)
            .load(conn)?;
        Ok(rows.into_iter().map(named).collect())
    }

    /// Deletes the row if it is still the one read (not replaced by a newer archive since).
    pub fn delete_if_unchanged(conn: &mut PgConnection, row: &CourseArchive) -> QueryResult<bool> {
        diesel::delete(
            course_archives::table
                .filter(course_archives::id.eq(row.id))
                .filter(course_archives::sha256.eq(&row.sha256))
                .filter(course_archives::created_at.eq(row.created_at)),
        )
        .execute(conn)
        .map(|n| n == 1)
    }
}
