-- A course's archived homes (`cohort course archive`): one `.tar.gz` per student in the
-- controller's archive store, its SHA-256 and size, kept until `expires_at` and then deleted
-- with its row by the archive sweep. Archiving again replaces a student's archive.
CREATE TABLE course_archives (
    id BIGSERIAL PRIMARY KEY,
    course_id BIGINT NOT NULL REFERENCES courses(id) ON DELETE CASCADE,
    user_id BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    sha256 TEXT NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    size_bytes BIGINT NOT NULL CHECK (size_bytes >= 0),
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at TIMESTAMPTZ NOT NULL,
    UNIQUE (course_id, user_id)
);
CREATE INDEX course_archives_expires_at ON course_archives (expires_at);
