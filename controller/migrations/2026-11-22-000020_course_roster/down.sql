ALTER TABLE enrollments DROP COLUMN initial_password;
