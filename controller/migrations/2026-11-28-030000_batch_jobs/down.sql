DROP TABLE course_job_limits;
DROP TABLE batch_jobs;
