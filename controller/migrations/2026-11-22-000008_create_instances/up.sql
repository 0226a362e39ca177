CREATE TABLE instances (
    id BIGSERIAL PRIMARY KEY,
    -- LXD names are global to Cohort: one name, one container, whichever node holds it.
    name TEXT NOT NULL UNIQUE,
    owner_id BIGINT NOT NULL REFERENCES users (id),
    course_id BIGINT REFERENCES courses (id) ON DELETE SET NULL,
    image_id BIGINT NOT NULL REFERENCES images (id),
    -- NULL while queued.
    node_id BIGINT REFERENCES nodes (id),
    ssh_port INTEGER CHECK (ssh_port BETWEEN 1 AND 65535),
    desired_state TEXT NOT NULL DEFAULT 'running'
        CHECK (desired_state IN ('running', 'stopped', 'deleted')),
    observed_state TEXT NOT NULL DEFAULT 'pending'
        CHECK (observed_state IN ('queued', 'pending', 'running', 'stopped', 'unknown', 'error')),
    cpu INTEGER NOT NULL CHECK (cpu > 0),
    memory_mib BIGINT NOT NULL CHECK (memory_mib > 0),
    disk_gib BIGINT NOT NULL CHECK (disk_gib > 0),
    gpu_count INTEGER NOT NULL DEFAULT 0 CHECK (gpu_count >= 0),
    gpu_model TEXT,
    gpu_share TEXT NOT NULL DEFAULT 'shared' CHECK (gpu_share IN ('exclusive', 'shared')),
    strategy TEXT NOT NULL DEFAULT 'spread' CHECK (strategy IN ('spread', 'pack')),
    priority INTEGER NOT NULL DEFAULT 0,
    config JSONB NOT NULL DEFAULT '{}',
    error TEXT,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_seen_at TIMESTAMPTZ,
    -- A placed instance has both a node and a port; a queued one neither.
    CHECK ((node_id IS NULL) = (ssh_port IS NULL))
);

-- A row lives until its container is gone, so this holds "one live instance per (node, port)".
CREATE UNIQUE INDEX instances_node_ssh_port ON instances (node_id, ssh_port);
CREATE INDEX instances_queue ON instances (priority DESC, created_at) WHERE node_id IS NULL;
CREATE INDEX instances_owner ON instances (owner_id);
SELECT diesel_manage_updated_at('instances');
