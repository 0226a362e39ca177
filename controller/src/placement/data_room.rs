//! Room for a course's datasets: a node that takes one of the course's containers makes a
//! volume of each dataset it lacks, so placement asks for the datasets' size on top of the root
//! disk and the home (whole GiB, rounded up). Once a node holds them, its pool's reported use
//! counts them as it counts every volume there; a node that lacks the room is not chosen.

use diesel::prelude::*;

use crate::db::models::course_dataset::CourseDataset;

/// GiB the datasets of `course` need on a node; 0 outside a course.
pub fn data_gib(conn: &mut PgConnection, course: Option<i64>) -> QueryResult<i64> {
    let Some(course) = course else {
        return Ok(0);
    };
    let bytes = CourseDataset::used_bytes(conn, course, "")?;
    Ok((bytes + (1 << 30) - 1) >> 30)
}
