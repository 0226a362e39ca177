-- A course's datasets: the current version of each (its tarball's SHA-256 names the file in
-- the controller's data store and the custom volume on the nodes).
CREATE TABLE course_datasets (
    id BIGSERIAL PRIMARY KEY,
    course_id BIGINT NOT NULL REFERENCES courses(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    sha256 TEXT NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    size_bytes BIGINT NOT NULL CHECK (size_bytes >= 0),
    pushed_by BIGINT REFERENCES users(id) ON DELETE SET NULL,
    pushed_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (course_id, name)
);
CREATE INDEX course_datasets_sha256 ON course_datasets (sha256);

-- The most a course's datasets may hold together; NULL: the controller's default.
ALTER TABLE courses ADD COLUMN data_quota_mib BIGINT CHECK (data_quota_mib >= 0);
