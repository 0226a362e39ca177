ALTER TABLE courses DROP COLUMN gpu_memory_mib;
