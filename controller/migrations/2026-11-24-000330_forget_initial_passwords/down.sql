ALTER TABLE users DROP COLUMN own_credentials_at;
ALTER TABLE users DROP COLUMN roster_course_id;
