-- Reclaim may take an idle container's GPUs instead of stopping it ('detach'); the instance
-- keeps running and remembers when and why its GPUs were taken, so a pass detaches once.
ALTER TABLE course_reclaim DROP CONSTRAINT course_reclaim_idle_action_check;
ALTER TABLE course_reclaim ADD CONSTRAINT course_reclaim_idle_action_check
    CHECK (idle_action IN ('stop', 'detach'));
ALTER TABLE instance_usage ADD COLUMN gpus_detached_at TIMESTAMPTZ;
ALTER TABLE instance_usage ADD COLUMN detach_reason TEXT;
