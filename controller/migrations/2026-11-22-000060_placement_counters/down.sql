DROP INDEX instances_course;
DROP INDEX gpus_node;
DROP TRIGGER gpu_allocations_count_update ON gpu_allocations;
DROP TRIGGER gpu_allocations_count_insert_delete ON gpu_allocations;
DROP FUNCTION cohort_gpu_allocated();
DROP TRIGGER instances_node_usage_update ON instances;
DROP TRIGGER instances_node_usage_insert_delete ON instances;
DROP FUNCTION cohort_node_usage();
ALTER TABLE gpus DROP CONSTRAINT gpus_allocated_within_limit;
ALTER TABLE nodes DROP CONSTRAINT nodes_usage_not_negative;
ALTER TABLE gpus DROP COLUMN allocated;
ALTER TABLE nodes DROP COLUMN cpu_used, DROP COLUMN memory_used_mib, DROP COLUMN disk_used_gib,
    DROP COLUMN instance_count;
