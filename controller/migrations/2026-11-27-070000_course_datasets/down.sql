ALTER TABLE courses DROP COLUMN data_quota_mib;
DROP TABLE course_datasets;
