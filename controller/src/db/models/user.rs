//! `users`: people and their role.

use chrono::{DateTime, Utc};
use cohort_proto::api::users::Role;
use diesel::prelude::*;

use crate::db::schema::users;

#[derive(Debug, Clone, Queryable, Selectable, Identifiable)]
#[diesel(table_name = users, check_for_backend(diesel::pg::Pg))]
pub struct User {
    pub id: i64,
    pub username: String,
    pub role: String,
    pub full_name: Option<String>,
    pub email: Option<String>,
    pub password_hash: Option<String>,
    pub created_at: DateTime<Utc>,
    pub disabled_at: Option<DateTime<Utc>>,
    /// The course whose roster created the account, if one did.
    pub roster_course_id: Option<i64>,
    /// When the person first set credentials of their own (an SSH key).
    pub own_credentials_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Insertable)]
#[diesel(table_name = users)]
pub struct NewUser<'a> {
    pub username: &'a str,
    pub role: &'a str,
    pub full_name: Option<&'a str>,
    pub email: Option<&'a str>,
}

/// The database spelling of a role.
pub fn role_name(role: Role) -> &'static str {
    match role {
        Role::Admin => "admin",
        Role::Instructor => "instructor",
        Role::Student => "student",
    }
}

impl User {
    /// The role; the CHECK constraint allows only the three names.
    pub fn role(&self) -> Role {
        match self.role.as_str() {
            "admin" => Role::Admin,
            "instructor" => Role::Instructor,
            _ => Role::Student,
        }
    }

    pub fn insert(conn: &mut PgConnection, new: &NewUser<'_>) -> QueryResult<User> {
        diesel::insert_into(users::table)
            .values(new)
            .returning(User::as_returning())
            .get_result(conn)
    }

    pub fn find(conn: &mut PgConnection, id: i64) -> QueryResult<User> {
        users::table.find(id).select(User::as_select()).first(conn)
    }

    pub fn by_username(conn: &mut PgConnection, username: &str) -> QueryResult<Option<User>> {
        users::table
            .filter(users::username.eq(username))
            .select(User::as_select())
            .first(conn)
            .optional()
    }

    pub fn list(conn: &mut PgConnection) -> QueryResult<Vec<User>> {
        users::table
            .order(users::username)
            .select(User::as_select())
            .load(conn)
    }

    /// `instructor_id` and the students of the courses they teach, by username.
    pub fn taught_by(conn: &mut PgConnection, instructor_id: i64) -> QueryResult<Vec<User>> {
        use crate::db::schema::{courses, enrollments};
        let students = enrollments::table
            .inner_join(courses::table)
            .filter(crate::db::models::course_staff::taught_by(instructor_id))
            .select(enrollments::user_id);
        users::table
            .filter(users::id.eq_any(students).or(users::id.eq(instructor_id)))
            .order(users::username)
            .select(User::as_select())
            .load(conn)
    }

    pub fn is_disabled(&self) -> bool {
        self.disabled_at.is_some()
    }

    /// Disables (`true`) or enables the account.
    pub fn set_disabled(conn: &mut PgConnection, id: i64, disabled: bool) -> QueryResult<User> {
        let at = disabled.then(Utc::now);
        diesel::update(users::table.find(id))
            .set(users::disabled_at.eq(at))
            .returning(User::as_returning())
            .get_result(conn)
    }

    pub fn set_role(conn: &mut PgConnection, id: i64, role: &str) -> QueryResult<User> {
        diesel::update(users::table.find(id))
            .set(users::role.eq(role))
            .returning(User::as_returning())
            .get_result(conn)
    }

    /// Deletes the account; its tokens, keys and enrollments go with it (ON DELETE CASCADE).
    pub fn delete(conn: &mut PgConnection, id: i64) -> QueryResult<usize> {
        diesel::delete(users::table.find(id)).execute(conn)
    }

    /// Locks the account's row until the transaction ends (to count what it holds and add one).
    pub fn lock(conn: &mut PgConnection, id: i64) -> QueryResult<()> {
        users::table
            .find(id)
            .select(users::id)
            .for_update()
            .first::<i64>(conn)
            .map(drop)
    }

    /// Records that `course_id`'s roster created the account.
    pub fn set_roster_course(
        conn: &mut PgConnection,
        id: i64,
        course_id: i64,
    ) -> QueryResult<usize> {
        diesel::update(users::table.find(id))
            .set(users::roster_course_id.eq(course_id))
            .execute(conn)
    }

    /// Records that the person set credentials of their own (the first time only counts).
    pub fn note_own_credentials(conn: &mut PgConnection, id: i64) -> QueryResult<usize> {
        diesel::update(
            users::table
                .find(id)
                .filter(users::own_credentials_at.is_null()),
        )
        .set(users::own_credentials_at.eq(Utc::now()))
        .execute(conn)
    }

    /// Replaces the crypt(3) hash of the account's password.
    pub fn set_password_hash(conn: &mut PgConnection, id: i64, hash: &str) -> QueryResult<User> {
        diesel::update(users::table.find(id))
            .set(users::password_hash.eq(hash))
            .returning(User::as_returning())
            .get_result(conn)
    }

    pub fn count_admins(conn: &mut PgConnection) -> QueryResult<i64> {
        users::table
            .filter(users::role.eq("admin"))
            .count()
            .get_result(conn)
    }

    /// The username of account `id`.
    pub fn username_of(conn: &mut PgConnection, id: i64) -> QueryResult<String> {
        users::table.find(id).select(users::username).first(conn)
    }
}
