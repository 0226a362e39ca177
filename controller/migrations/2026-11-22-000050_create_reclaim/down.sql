DROP INDEX audit_log_object;
DROP TABLE instance_usage;
DROP TABLE course_reclaim;
