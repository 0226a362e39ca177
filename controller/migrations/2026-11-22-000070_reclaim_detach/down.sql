ALTER TABLE instance_usage DROP COLUMN detach_reason;
ALTER TABLE instance_usage DROP COLUMN gpus_detached_at;
UPDATE course_reclaim SET idle_action = 'stop' WHERE idle_action = 'detach';
ALTER TABLE course_reclaim DROP CONSTRAINT course_reclaim_idle_action_check;
ALTER TABLE course_reclaim ADD CONSTRAINT course_reclaim_idle_action_check
    CHECK (idle_action IN ('stop'));
