ALTER TABLE courses DROP COLUMN archive_days;
