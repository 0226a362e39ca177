-- Reclaim with a warning (issue 43): a course's reclaimer warns `warn_minutes` (of the
-- reclaimer's minutes) before it stops a container or detaches its GPUs, and acts only once the
-- warning is due and its reason still holds.
ALTER TABLE course_reclaim
    ADD COLUMN warn_minutes INTEGER NOT NULL DEFAULT 10 CHECK (warn_minutes BETWEEN 0 AND 1440);

-- One pending warning per container and reason ('idle': idle stop or idle GPU detach;
-- 'max_runtime'): when the student was told, when the reclaim is due, and when they pressed
-- Keep working (once per warning). Kept in the database so a controller restart neither tells
-- twice nor acts before the warning is due.
CREATE TABLE reclaim_warnings (
    instance_id BIGINT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    reason TEXT NOT NULL CHECK (reason IN ('idle', 'max_runtime')),
    action TEXT NOT NULL CHECK (action IN ('stop', 'detach')),
    warned_at TIMESTAMPTZ NOT NULL,
    due_at TIMESTAMPTZ NOT NULL,
    kept_at TIMESTAMPTZ,
    PRIMARY KEY (instance_id, reason)
);
