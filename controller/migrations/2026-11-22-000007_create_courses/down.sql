DROP TABLE enrollments;
DROP TABLE courses;
