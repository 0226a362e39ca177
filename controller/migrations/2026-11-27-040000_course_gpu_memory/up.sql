-- The GPU memory cap of each student's container in a course sharing its GPUs (MiB); NULL: the
-- card's memory over the course's gpu_share.
ALTER TABLE courses ADD COLUMN gpu_memory_mib BIGINT CHECK (gpu_memory_mib IS NULL OR gpu_memory_mib >= 64);
