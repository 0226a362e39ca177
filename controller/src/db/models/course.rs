//! `courses`: a class, its template and per-student resources, its quota and state.

use chrono::{DateTime, Utc};
use cohort_proto::api::courses::CourseState;
use cohort_proto::api::instances::GpuShare;
use diesel::prelude::*;

use crate::db::schema::{courses, enrollments};

#[derive(Debug, Clone, Queryable, Selectable, Identifiable)]
#[diesel(table_name = courses, check_for_backend(diesel::pg::Pg))]
pub struct Course {
    pub id: i64,
    pub code: String,
    pub title: String,
    pub instructor_id: i64,
    pub image_id: Option<i64>,
    pub cpu: i32,
    pub memory_mib: i64,
    pub disk_gib: i64,
    pub gpus: i32,
    pub gpu_model: Option<String>,
    pub gpu_share: GpuShare,
    pub starts_at: Option<DateTime<Utc>>,
    pub ends_at: Option<DateTime<Utc>>,
    pub state: CourseState,
    pub quota_students: Option<i32>,
    pub quota_gpus: Option<i32>,
    pub quota_memory_mib: Option<i64>,
    pub created_at: DateTime<Utc>,
    /// `--gpu-share N` with N > 1: at most N containers on one GPU (under its `share_limit`).
    pub gpu_share_count: Option<i32>,
    /// `limits.processes` of each student's container; `None`: the controller's default.
    pub processes: Option<i32>,
    /// Each student's home volume in MiB; `None`: the controller's default.
    pub home_mib: Option<i32>,
    /// Whether its instructors may open its students' JupyterLab through the portal.
    pub jupyter_instructors: bool,
    /// Sharing: the GPU memory cap of each student's container in MiB; `None`: the card's
    /// memory over `gpu_share_count`.
    pub gpu_memory_mib: Option<i64>,
}

#[derive(Debug, Insertable)]
#[diesel(table_name = courses)]
pub struct NewCourse<'a> {
    pub code: &'a str,
    pub title: &'a str,
    pub instructor_id: i64,
    pub image_id: Option<i64>,
    pub cpu: i32,
    pub memory_mib: i64,
    pub disk_gib: i64,
    pub gpus: i32,
    pub gpu_model: Option<&'a str>,
    pub gpu_share: GpuShare,
    pub gpu_share_count: Option<i32>,
    pub processes: Option<i32>,
    pub home_mib: Option<i32>,
    pub gpu_memory_mib: Option<i64>,
    pub starts_at: Option<DateTime<Utc>>,
    pub ends_at: Option<DateTime<Utc>>,
}

impl Course {
    pub fn insert(conn: &mut PgConnection, new: &NewCourse<'_>) -> QueryResult<Course> {
        diesel::insert_into(courses::table)
            .values(new)
            .returning(Course::as_returning())
            .get_result(conn)
    }

    pub fn by_code(conn: &mut PgConnection, code: &str) -> QueryResult<Option<Course>> {
        courses::table
            .filter(courses::code.eq(code))
            .select(Course::as_select())
            .first(conn)
            .optional()
    }

    /// The GPU memory cap course `id` sets for its students' containers (MiB), if any.
    pub fn gpu_memory_of(conn: &mut PgConnection, id: i64) -> QueryResult<Option<i64>> {
        courses::table
            .find(id)
            .select(courses::gpu_memory_mib)
            .first(conn)
    }

    /// Every course, or those one instructor teaches.
    pub fn list(conn: &mut PgConnection, instructor: Option<i64>) -> QueryResult<Vec<Course>> {
        let mut query = courses::table.select(Course::as_select()).into_boxed();
        if let Some(id) = instructor {
            query = query.filter(crate::db::models::course_staff::taught_by(id));
        }
        query.order(courses::code).load(conn)
    }

    /// Courses a student is enrolled in.
    pub fn of_student(conn: &mut PgConnection, user_id: i64) -> QueryResult<Vec<Course>> {
        courses::table
            .inner_join(enrollments::table)
            .filter(enrollments::user_id.eq(user_id))
            .select(Course::as_select())
            .order(courses::code)
            .load(conn)
    }

    pub fn set_quota(
        conn: &mut PgConnection,
        id: i64,
        students: Option<i32>,
        gpus: Option<i32>,
        memory_mib: Option<i64>,
    ) -> QueryResult<usize> {
        diesel::update(courses::table.find(id))
            .set((
                courses::quota_students.eq(students),
                courses::quota_gpus.eq(gpus),
                courses::quota_memory_mib.eq(memory_mib),
            ))
            .execute(conn)
    }

    /// Each student's cores, memory and root disk, for the containers made from now on.
    pub fn set_limits(
        conn: &mut PgConnection,
        id: i64,
        cpu: i32,
        memory_mib: i64,
        disk_gib: i64,
    ) -> QueryResult<usize> {
        diesel::update(courses::table.find(id))
            .set((
                courses::cpu.eq(cpu),
                courses::memory_mib.eq(memory_mib),
                courses::disk_gib.eq(disk_gib),
            ))
            .execute(conn)
    }

    /// The course, its row locked until the transaction ends.
    pub fn find(conn: &mut PgConnection, id: i64) -> QueryResult<Course> {
        courses::table
            .find(id)
            .select(Course::as_select())
            .first(conn)
    }

    pub fn lock(conn: &mut PgConnection, id: i64) -> QueryResult<Course> {
        courses::table
            .find(id)
            .select(Course::as_select())
            .for_update()
            .first(conn)
    }

    /// Removes the course; its enrollments and reclaim policy go with it (ON DELETE CASCADE).
    pub fn delete(conn: &mut PgConnection, id: i64) -> QueryResult<usize> {
        diesel::delete(courses::table.find(id)).execute(conn)
    }

    pub fn set_state(conn: &mut PgConnection, id: i64, state: CourseState) -> QueryResult<usize> {
        diesel::update(courses::table.find(id))
            .set(courses::state.eq(state))
            .execute(conn)
    }

    /// Active courses whose end date has passed.
    pub fn ended_but_active(conn: &mut PgConnection) -> QueryResult<Vec<Course>> {
        courses::table
            .filter(courses::state.eq(CourseState::Active))
            .filter(courses::ends_at.lt(Utc::now()))
            .select(Course::as_select())
            .load(conn)
    }

    /// The course's `processes` (the process limit of its containers).
    pub fn processes(conn: &mut PgConnection, id: i64) -> QueryResult<Option<i32>> {
        courses::table
            .find(id)
            .select(courses::processes)
            .first::<Option<i32>>(conn)
    }

    /// The course's `home_mib` (its students' home size).
    pub fn home_mib(conn: &mut PgConnection, id: i64) -> QueryResult<Option<i32>> {
        courses::table
            .find(id)
            .select(courses::home_mib)
            .first(conn)
    }

    pub fn set_home_mib(conn: &mut PgConnection, id: i64, mib: Option<i32>) -> QueryResult<usize> {
        diesel::update(courses::table.find(id))
            .set(courses::home_mib.eq(mib))
            .execute(conn)
    }

    /// The courses whose code is one of `codes`: (id, code).
    pub fn ids_of_codes(
        conn: &mut PgConnection,
        codes: &[&str],
    ) -> QueryResult<Vec<(i64, String)>> {
        courses::table
            .filter(courses::code.eq_any(codes))
            .select((courses::id, courses::code))
            .load(conn)
    }

    /// Whether the course's instructors get their students' notebooks.
    pub fn set_jupyter_instructors(
        conn: &mut PgConnection,
        id: i64,
        on: bool,
    ) -> QueryResult<usize> {
        diesel::update(courses::table.find(id))
            .set(courses::jupyter_instructors.eq(on))
            .execute(conn)
    }

    /// The codes of the courses account `instructor_id` is the instructor of (not staff of:
    /// staff rights end with the instructor role on their own).
    pub fn codes_taught_by(
        conn: &mut PgConnection,
        instructor_id: i64,
    ) -> QueryResult<Vec<String>> {
        courses::table
            .filter(courses::instructor_id.eq(instructor_id))
            .select(courses::code)
            .load(conn)
    }

    /// The courses account `instructor_id` teaches (its own and those it is staff of): id, code.
    pub fn taught_by(
        conn: &mut PgConnection,
        instructor_id: i64,
    ) -> QueryResult<Vec<(i64, String)>> {
        courses::table
            .filter(crate::db::models::course_staff::taught_by(instructor_id))
            .select((courses::id, courses::code))
            .load(conn)
    }

    /// Whether course `id` lets whoever teaches it into its students' notebooks.
    pub fn jupyter_instructors(conn: &mut PgConnection, id: i64) -> QueryResult<bool> {
        courses::table
            .find(id)
            .select(courses::jupyter_instructors)
            .first(conn)
    }
}
