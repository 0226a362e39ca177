DROP TABLE course_home_snapshots;
