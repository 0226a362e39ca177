CREATE TABLE nodes (
    id BIGSERIAL PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    agent_url TEXT NOT NULL,
    ssh_host TEXT NOT NULL,
    ssh_port_first INTEGER NOT NULL CHECK (ssh_port_first BETWEEN 1 AND 65535),
    ssh_port_last INTEGER NOT NULL CHECK (ssh_port_last BETWEEN ssh_port_first AND 65535),
    state TEXT NOT NULL DEFAULT 'online'
        CHECK (state IN ('online', 'offline', 'cordoned', 'evacuating')),
    cores INTEGER NOT NULL DEFAULT 0,
    memory_bytes BIGINT NOT NULL DEFAULT 0,
    disk_total_bytes BIGINT NOT NULL DEFAULT 0,
    disk_free_bytes BIGINT NOT NULL DEFAULT 0,
    lxd_version TEXT,
    storage_driver TEXT,
    nvidia_runtime BOOLEAN NOT NULL DEFAULT false,
    last_heartbeat_at TIMESTAMPTZ,
    enrolled_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
