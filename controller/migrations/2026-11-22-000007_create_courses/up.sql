CREATE TABLE courses (
    id BIGSERIAL PRIMARY KEY,
    code TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL,
    instructor_id BIGINT NOT NULL REFERENCES users (id),
    image_id BIGINT REFERENCES images (id) ON DELETE SET NULL,
    cpu INTEGER NOT NULL DEFAULT 1 CHECK (cpu > 0),
    memory_mib BIGINT NOT NULL DEFAULT 1024 CHECK (memory_mib > 0),
    disk_gib BIGINT NOT NULL DEFAULT 10 CHECK (disk_gib > 0),
    gpus INTEGER NOT NULL DEFAULT 0 CHECK (gpus >= 0),
    gpu_model TEXT,
    gpu_share TEXT NOT NULL DEFAULT 'shared' CHECK (gpu_share IN ('exclusive', 'shared')),
    starts_at TIMESTAMPTZ,
    ends_at TIMESTAMPTZ,
    state TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'ended', 'torn_down')),
    -- Admin-set quota; NULL = no limit.
    quota_students INTEGER CHECK (quota_students >= 0),
    quota_gpus INTEGER CHECK (quota_gpus >= 0),
    quota_memory_mib BIGINT CHECK (quota_memory_mib >= 0),
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE enrollments (
    course_id BIGINT NOT NULL REFERENCES courses (id) ON DELETE CASCADE,
    user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (course_id, user_id)
);
