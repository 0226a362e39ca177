-- GPUs on demand (issue 43). A course in `on-demand` mode makes its containers without a GPU;
-- a student asks for one for a lease of some hours (at most the course's maximum). No row in
-- course_gpu_modes = pinned (the GPU is the container's from its creation).
CREATE TABLE course_gpu_modes (
    course_id BIGINT PRIMARY KEY REFERENCES courses (id) ON DELETE CASCADE,
    gpu_mode TEXT NOT NULL CHECK (gpu_mode IN ('pinned', 'on-demand')),
    gpu_lease_max_hours DOUBLE PRECISION NOT NULL DEFAULT 2
        CHECK (gpu_lease_max_hours > 0 AND gpu_lease_max_hours <= 168)
);

-- One request for a GPU and, once granted, its lease: queued until a GPU on the container's
-- node is free (fair share decides who goes first), active from granted_at to ends_at, then
-- ended (with the reason) or cancelled while queued. Times are the database's clock.
CREATE TABLE gpu_leases (
    id BIGSERIAL PRIMARY KEY,
    instance_id BIGINT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    course_id BIGINT NOT NULL REFERENCES courses (id) ON DELETE CASCADE,
    node_id BIGINT REFERENCES nodes (id) ON DELETE SET NULL,
    gpu_id BIGINT REFERENCES gpus (id) ON DELETE SET NULL,
    hours DOUBLE PRECISION NOT NULL CHECK (hours > 0 AND hours <= 168),
    state TEXT NOT NULL CHECK (state IN ('queued', 'active', 'ended', 'cancelled')),
    requested_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    granted_at TIMESTAMPTZ,
    ends_at TIMESTAMPTZ,
    ended_at TIMESTAMPTZ,
    end_reason TEXT,
    CHECK (state <> 'active' OR (granted_at IS NOT NULL AND ends_at IS NOT NULL))
);
-- At most one open request or lease per container.
CREATE UNIQUE INDEX gpu_leases_open ON gpu_leases (instance_id) WHERE state IN ('queued', 'active');
CREATE INDEX gpu_leases_open_by_node ON gpu_leases (node_id, state) WHERE state IN ('queued', 'active');
