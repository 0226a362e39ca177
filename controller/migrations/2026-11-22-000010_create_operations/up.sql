-- Durable long actions. A worker claims a row with FOR UPDATE SKIP LOCKED and holds it by a
-- lease (claimed_by, lease_until); a lease that runs out lets another worker resume it.
CREATE TABLE operations (
    id UUID PRIMARY KEY,
    kind TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'running', 'success', 'failure', 'cancelled')),
    created_by BIGINT REFERENCES users (id) ON DELETE SET NULL,
    target TEXT NOT NULL,
    payload JSONB NOT NULL DEFAULT '{}',
    error TEXT,
    claimed_by TEXT,
    lease_until TIMESTAMPTZ,
    run_after TIMESTAMPTZ NOT NULL DEFAULT now(),
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at TIMESTAMPTZ
);
CREATE INDEX operations_runnable ON operations (run_after) WHERE status IN ('pending', 'running');
SELECT diesel_manage_updated_at('operations');

-- One step of an operation; its id is the agent's idempotency key for that step.
CREATE TABLE operation_items (
    id UUID PRIMARY KEY,
    operation_id UUID NOT NULL REFERENCES operations (id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    instance_id BIGINT REFERENCES instances (id) ON DELETE SET NULL,
    node_name TEXT,
    ssh_port INTEGER,
    status TEXT NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'running', 'success', 'failure', 'cancelled')),
    attempts INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (operation_id, position)
);
SELECT diesel_manage_updated_at('operation_items');
