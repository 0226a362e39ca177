-- GPU sharing held by the database: an allocation is a numbered slot of a GPU. The primary key
-- (gpu_id, slot) makes a slot single-use, and the CHECK keeps slot < share_limit, where
-- share_limit is the GPU's own value, carried here by the composite foreign key to
-- gpus (id, share_limit). ON UPDATE CASCADE re-checks every allocation when an admin changes a
-- GPU's share_limit, so lowering it below a live slot fails instead of over-committing.
-- Hence at most share_limit live allocations per GPU, whatever the code does.
CREATE TABLE gpu_allocations (
    gpu_id BIGINT NOT NULL,
    share_limit INTEGER NOT NULL,
    slot INTEGER NOT NULL CHECK (slot >= 0 AND slot < share_limit),
    instance_id BIGINT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (gpu_id, slot),
    FOREIGN KEY (gpu_id, share_limit) REFERENCES gpus (id, share_limit)
        ON UPDATE CASCADE ON DELETE RESTRICT,
    UNIQUE (instance_id, gpu_id)
);
