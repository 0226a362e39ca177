ALTER TABLE instance_usage DROP COLUMN notebook_active_at;
ALTER TABLE images DROP COLUMN jupyter;
