-- GPU time per instance and hour (issue 43): allocated GPU-seconds (a GPU held) and busy
-- GPU-seconds (weighted by utilisation), added to by the poller at each inventory, upserted.
-- Raw samples are not kept. No foreign keys: a row outlives its instance, course and user (a
-- department's report covers deleted containers too), so the names are copied in; the pruner
-- deletes rows past COHORT_GPU_USAGE_RETENTION_DAYS.
CREATE TABLE gpu_usage_hours (
    instance_id BIGINT NOT NULL,
    hour TIMESTAMPTZ NOT NULL,
    instance_name TEXT NOT NULL,
    course_id BIGINT,
    course_code TEXT,
    owner_id BIGINT NOT NULL,
    username TEXT NOT NULL,
    node_name TEXT NOT NULL,
    allocated_s DOUBLE PRECISION NOT NULL DEFAULT 0 CHECK (allocated_s >= 0),
    busy_s DOUBLE PRECISION NOT NULL DEFAULT 0 CHECK (busy_s >= 0),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (instance_id, hour),
    CHECK (date_trunc('hour', hour) = hour)
);
CREATE INDEX gpu_usage_hours_hour ON gpu_usage_hours (hour);
CREATE INDEX gpu_usage_hours_course ON gpu_usage_hours (course_id, hour);
CREATE INDEX gpu_usage_hours_owner ON gpu_usage_hours (owner_id, hour);
