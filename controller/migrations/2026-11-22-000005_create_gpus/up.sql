CREATE TABLE gpus (
    id BIGSERIAL PRIMARY KEY,
    node_id BIGINT NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    uuid TEXT NOT NULL UNIQUE,
    idx INTEGER NOT NULL,
    model TEXT NOT NULL,
    memory_bytes BIGINT NOT NULL,
    pci_address TEXT NOT NULL,
    -- Set for a MIG instance: the physical GPU's uuid. MIG instances are exclusive.
    mig_parent TEXT,
    share_limit INTEGER NOT NULL DEFAULT 1 CHECK (share_limit BETWEEN 1 AND 64),
    present BOOLEAN NOT NULL DEFAULT true,
    CHECK (mig_parent IS NULL OR share_limit = 1),
    -- The target of gpu_allocations' (gpu_id, share_limit) foreign key.
    UNIQUE (id, share_limit)
);
