-- Batch jobs (issue 44): a command run in the student's own container, as the student, once its
-- turn comes; a job with GPUs waits for a GPU lease (gpu_leases) on the container's node and
-- gives it back when it ends. The process lives in the container under its own session, so a
-- restart of the controller or the agent loses nothing: the agent reads its state back from
-- ~/.cohort/jobs/<id>.{pid,exit,log}. Times are the database's clock.
CREATE TABLE batch_jobs (
    id BIGSERIAL PRIMARY KEY,
    instance_id BIGINT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    course_id BIGINT REFERENCES courses (id) ON DELETE CASCADE,
    command TEXT[] NOT NULL CHECK (cardinality(command) > 0),
    workdir TEXT,
    environment JSONB NOT NULL DEFAULT '{}',
    gpus INT NOT NULL CHECK (gpus >= 0),
    hours DOUBLE PRECISION NOT NULL CHECK (hours > 0 AND hours <= 168),
    priority INT NOT NULL DEFAULT 0 CHECK (priority BETWEEN -100 AND 100),
    state TEXT NOT NULL CHECK (state IN ('queued', 'starting', 'running', 'unknown',
                                         'succeeded', 'failed', 'cancelled', 'killed')),
    lease_id BIGINT REFERENCES gpu_leases (id) ON DELETE SET NULL,
    node_id BIGINT REFERENCES nodes (id) ON DELETE SET NULL,
    submitted_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    started_at TIMESTAMPTZ,
    ends_at TIMESTAMPTZ,
    warned_at TIMESTAMPTZ,
    ended_at TIMESTAMPTZ,
    exit_code INT,
    -- Why it ended, or why it is unknown.
    reason TEXT,
    -- Set when it is to be stopped (cancelled, past its limit, its container stopped): the
    -- reason its end records, and the state it ends in.
    stop_reason TEXT,
    stop_state TEXT CHECK (stop_state IN ('cancelled', 'killed')),
    gpu_seconds DOUBLE PRECISION NOT NULL DEFAULT 0
);
CREATE INDEX batch_jobs_open ON batch_jobs (state, priority DESC, submitted_at)
    WHERE state IN ('queued', 'starting', 'running', 'unknown');
CREATE INDEX batch_jobs_by_user ON batch_jobs (user_id, state);
CREATE UNIQUE INDEX batch_jobs_lease ON batch_jobs (lease_id) WHERE lease_id IS NOT NULL;

-- A course's limits on each student's jobs: running at once, and queued (waiting) at once.
CREATE TABLE course_job_limits (
    course_id BIGINT PRIMARY KEY REFERENCES courses (id) ON DELETE CASCADE,
    max_running INT NOT NULL CHECK (max_running BETWEEN 1 AND 100),
    max_queued INT NOT NULL CHECK (max_queued BETWEEN 0 AND 1000)
);
