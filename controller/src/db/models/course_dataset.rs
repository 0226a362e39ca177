//! `course_datasets` (and `courses.data_quota_mib`): each course's datasets, one row per name
//! holding its current version, and which containers on a node mount them.

use chrono::{DateTime, Utc};
use diesel::prelude::*;

use crate::db::schema::{course_datasets, course_staff, courses, instances, nodes, users};

#[derive(Debug, Clone, Queryable, Selectable, Identifiable)]
#[diesel(table_name = course_datasets, check_for_backend(diesel::pg::Pg))]
pub struct CourseDataset {
    pub id: i64,
    pub course_id: i64,
    pub name: String,
    pub sha256: String,
    pub size_bytes: i64,
    pub pushed_by: Option<i64>,
    pub pushed_at: DateTime<Utc>,
}

#[derive(Debug, Insertable)]
#[diesel(table_name = course_datasets)]
pub struct NewCourseDataset<'a> {
    pub course_id: i64,
    pub name: &'a str,
    pub sha256: &'a str,
    pub size_bytes: i64,
    pub pushed_by: Option<i64>,
}

/// A container that mounts a course's datasets: its name and whether it is staff's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mounter {
    pub instance: String,
    pub staff: bool,
}

/// Instances that are neither deleted nor being deleted.
const DELETED: &str = "deleted";

impl CourseDataset {
    /// Inserts the dataset or makes `new` its current version; the row and the version it
    /// replaced, if any.
    pub fn put(
        conn: &mut PgConnection,
        new: &NewCourseDataset<'_>,
    ) -> QueryResult<(CourseDataset, Option<String>)> {
        let old = Self::find(conn, new.course_id, new.name)?.map(|d| d.sha256);
        let row = diesel::insert_into(course_datasets::table)
            .values(new)
            .on_conflict((course_datasets::course_id, course_datasets::name))
            .do_update()
            .set((
                course_datasets::sha256.eq(new.sha256),
                course_datasets::size_bytes.eq(new.size_bytes),
                course_datasets::pushed_by.eq(new.pushed_by),
                course_datasets::pushed_at.eq(diesel::dsl::now),
            ))
            .returning(CourseDataset::as_returning())
            .get_result(conn)?;
        Ok((row, old))
    }

    pub fn find(
        conn: &mut PgConnection,
        course_id: i64,
        name: &str,
    ) -> QueryResult<Option<CourseDataset>> {
        course_datasets::table
            .filter(course_datasets::course_id.eq(course_id))
            .filter(course_datasets::name.eq(name))
            .select(CourseDataset::as_select())
            .first(conn)
            .optional()
    }

    /// The course's datasets by name, with who pushed each.
    pub fn of_course(
        conn: &mut PgConnection,
        course_id: i64,
    ) -> QueryResult<Vec<(CourseDataset, Option<String>)>> {
        course_datasets::table
            .left_join(users::table.on(users::id.nullable().eq(course_datasets::pushed_by)))
            .filter(course_datasets::course_id.eq(course_id))
            .order(course_datasets::name)
            .select((CourseDataset::as_select(), users::username.nullable()))
            .load(conn)
    }

    pub fn delete(conn: &mut PgConnection, id: i64) -> QueryResult<usize> {
        diesel::delete(course_datasets::table.find(id)).execute(conn)
    }

    /// Bytes the course's datasets hold, leaving out the one named `except`.
    pub fn used_bytes(conn: &mut PgConnection, course_id: i64, except: &str) -> QueryResult<i64> {
        let sizes: Vec<i64> = course_datasets::table
            .filter(course_datasets::course_id.eq(course_id))
            .filter(course_datasets::name.ne(except))
            .select(course_datasets::size_bytes)
            .load(conn)?;
        Ok(sizes.iter().sum())
    }

    /// Whether any course's dataset is this version (its file in the store is still needed).
    pub fn version_used(conn: &mut PgConnection, sha256: &str) -> QueryResult<bool> {
        diesel::select(diesel::dsl::exists(
            course_datasets::table.filter(course_datasets::sha256.eq(sha256)),
        ))
        .get_result(conn)
    }

    /// The course's data quota as set (MiB); `None`: the controller's default.
    pub fn quota_mib(conn: &mut PgConnection, course_id: i64) -> QueryResult<Option<i64>> {
        courses::table
            .find(course_id)
            .select(courses::data_quota_mib)
            .first(conn)
    }

    pub fn set_quota_mib(
        conn: &mut PgConnection,
        course_id: i64,
        mib: Option<i64>,
    ) -> QueryResult<usize> {
        diesel::update(courses::table.find(course_id))
            .set(courses::data_quota_mib.eq(mib))
            .execute(conn)
    }

    /// The nodes holding the course's containers or its instructor's own (course-less) ones:
    /// where its datasets go. By name.
    pub fn nodes_of_course(conn: &mut PgConnection, course_id: i64) -> QueryResult<Vec<String>> {
        let staff = Self::staff_ids(conn, course_id)?;
        nodes::table
            .inner_join(instances::table.on(instances::node_id.eq(nodes::id.nullable())))
            .filter(instances::desired_state.ne(DELETED))
            .filter(
                instances::course_id.eq(course_id).or(instances::owner_id
                    .eq_any(&staff)
                    .and(instances::course_id.is_null())),
            )
            .select(nodes::name)
            .distinct()
            .order(nodes::name)
            .load(conn)
    }

    /// The course's instructor and the rest of its staff (their course-less containers mount its
    /// datasets read-write).
    fn staff_ids(conn: &mut PgConnection, course_id: i64) -> QueryResult<Vec<i64>> {
        let instructor = courses::table
            .find(course_id)
            .select(courses::instructor_id)
            .first::<i64>(conn)?;
        let mut ids = crate::db::models::course_staff::user_ids(conn, course_id)?;
        ids.push(instructor);
        Ok(ids)
    }

    /// The course's containers on node `node_id` (its students'), and its staff's own
    /// course-less ones there.
    pub fn mounters(
        conn: &mut PgConnection,
        course_id: i64,
        node_id: i64,
    ) -> QueryResult<Vec<Mounter>> {
        let staff = Self::staff_ids(conn, course_id)?;
        let rows: Vec<(String, Option<i64>, i64)> = instances::table
            .filter(instances::node_id.eq(node_id))
            .filter(instances::desired_state.ne(DELETED))
            .filter(
                instances::course_id.eq(course_id).or(instances::owner_id
                    .eq_any(&staff)
                    .and(instances::course_id.is_null())),
            )
            .select((instances::name, instances::course_id, instances::owner_id))
            .order(instances::name)
            .load(conn)?;
        Ok(rows
            .into_iter()
            .map(|(instance, course, owner)| Mounter {
                instance,
                staff: course.is_none() && staff.contains(&owner),
            })
            .collect())
    }

    /// Every dataset version some container on node `node_id` may mount: the datasets of the
    /// courses its containers belong to, and of the courses their owners teach.
    pub fn versions_on_node(conn: &mut PgConnection, node_id: i64) -> QueryResult<Vec<String>> {
        let students: Vec<String> = course_datasets::table
            .inner_join(
                instances::table.on(instances::course_id.eq(course_datasets::course_id.nullable())),
            )
            .filter(instances::node_id.eq(node_id))
            .select(course_datasets::sha256)
            .distinct()
            .load(conn)?;
        let staff: Vec<String> = course_datasets::table
            .inner_join(courses::table)
            .inner_join(instances::table.on(instances::owner_id.eq(courses::instructor_id)))
            .filter(instances::node_id.eq(node_id))
            .select(course_datasets::sha256)
            .distinct()
            .load(conn)?;
        let listed: Vec<String> = course_datasets::table
            .inner_join(
                course_staff::table.on(course_staff::course_id.eq(course_datasets::course_id)),
            )
            .inner_join(instances::table.on(instances::owner_id.eq(course_staff::user_id)))
            .filter(instances::node_id.eq(node_id))
            .select(course_datasets::sha256)
            .distinct()
            .load(conn)?;
        let mut all = students;
        all.extend(staff);
        all.extend(listed);
        all.sort();
        all.dedup();
        Ok(all)
    }
}
