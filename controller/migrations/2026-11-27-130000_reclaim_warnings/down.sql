DROP TABLE reclaim_warnings;
ALTER TABLE course_reclaim DROP COLUMN warn_minutes;
