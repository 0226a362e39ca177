DROP TABLE course_archives;
