ALTER TABLE instance_usage DROP COLUMN gpus_attached_at;
