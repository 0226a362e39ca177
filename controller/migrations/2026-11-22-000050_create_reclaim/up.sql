-- Per course reclaim policy: GPU idleness and the longest run; NULL = never.
CREATE TABLE course_reclaim (
    course_id BIGINT PRIMARY KEY REFERENCES courses (id) ON DELETE CASCADE,
    idle_gpu_minutes INTEGER CHECK (idle_gpu_minutes > 0),
    idle_action TEXT NOT NULL DEFAULT 'stop' CHECK (idle_action IN ('stop')),
    max_runtime_minutes INTEGER CHECK (max_runtime_minutes > 0)
);

-- What the poller saw of an instance's GPU use and run, and why the reclaimer stopped it.
CREATE TABLE instance_usage (
    instance_id BIGINT PRIMARY KEY REFERENCES instances (id) ON DELETE CASCADE,
    -- Per GPU uuid: {"processes": N, "memory_used_bytes": N, "memory_share": F}.
    gpus JSONB NOT NULL DEFAULT '{}',
    gpu_processes INTEGER NOT NULL DEFAULT 0,
    gpu_memory_used_bytes BIGINT NOT NULL DEFAULT 0,
    -- Last poll that found a compute process of this instance on a GPU.
    gpu_active_at TIMESTAMPTZ,
    -- When the poller first saw the current run (NULL while not running).
    running_since TIMESTAMPTZ,
    stop_reason TEXT,
    stopped_at TIMESTAMPTZ,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX audit_log_object ON audit_log (object_kind, object);
