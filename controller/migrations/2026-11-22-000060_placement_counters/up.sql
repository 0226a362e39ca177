-- What placement reads for every candidate node, kept by the database itself: each node's
-- committed cpu, memory, disk and instance count, and each GPU's number of taken slots. Triggers
-- keep them in step with `instances` and `gpu_allocations` in the same transaction, so the
-- placement filter is one query over `nodes` instead of a few per node, and a placement that
-- holds a node's row lock reads counters no other placement can change under it.

ALTER TABLE nodes
    ADD COLUMN cpu_used BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN memory_used_mib BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN disk_used_gib BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN instance_count INTEGER NOT NULL DEFAULT 0;

ALTER TABLE gpus ADD COLUMN allocated INTEGER NOT NULL DEFAULT 0;

UPDATE nodes n
SET cpu_used = u.cpu, memory_used_mib = u.memory_mib, disk_used_gib = u.disk_gib,
    instance_count = u.count
FROM (
    SELECT node_id, sum(cpu) AS cpu, sum(memory_mib) AS memory_mib, sum(disk_gib) AS disk_gib,
           count(*) AS count
    FROM instances WHERE node_id IS NOT NULL GROUP BY node_id
) u
WHERE u.node_id = n.id;

UPDATE gpus g SET allocated = a.count
FROM (SELECT gpu_id, count(*) AS count FROM gpu_allocations GROUP BY gpu_id) a
WHERE a.gpu_id = g.id;

ALTER TABLE nodes ADD CONSTRAINT nodes_usage_not_negative
    CHECK (cpu_used >= 0 AND memory_used_mib >= 0 AND disk_used_gib >= 0 AND instance_count >= 0);
ALTER TABLE gpus ADD CONSTRAINT gpus_allocated_within_limit
    CHECK (allocated >= 0 AND allocated <= share_limit);

CREATE FUNCTION cohort_node_usage() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.node_id IS NOT NULL THEN
        UPDATE nodes SET cpu_used = cpu_used - OLD.cpu,
                         memory_used_mib = memory_used_mib - OLD.memory_mib,
                         disk_used_gib = disk_used_gib - OLD.disk_gib,
                         instance_count = instance_count - 1
        WHERE id = OLD.node_id;
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') AND NEW.node_id IS NOT NULL THEN
        UPDATE nodes SET cpu_used = cpu_used + NEW.cpu,
                         memory_used_mib = memory_used_mib + NEW.memory_mib,
                         disk_used_gib = disk_used_gib + NEW.disk_gib,
                         instance_count = instance_count + 1
        WHERE id = NEW.node_id;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER instances_node_usage_insert_delete
    AFTER INSERT OR DELETE ON instances
    FOR EACH ROW EXECUTE FUNCTION cohort_node_usage();

CREATE TRIGGER instances_node_usage_update
    AFTER UPDATE OF node_id, cpu, memory_mib, disk_gib ON instances
    FOR EACH ROW
    WHEN (OLD.node_id IS DISTINCT FROM NEW.node_id OR OLD.cpu <> NEW.cpu
          OR OLD.memory_mib <> NEW.memory_mib OR OLD.disk_gib <> NEW.disk_gib)
    EXECUTE FUNCTION cohort_node_usage();

CREATE FUNCTION cohort_gpu_allocated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        UPDATE gpus SET allocated = allocated - 1 WHERE id = OLD.gpu_id;
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') THEN
        UPDATE gpus SET allocated = allocated + 1 WHERE id = NEW.gpu_id;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER gpu_allocations_count_insert_delete
    AFTER INSERT OR DELETE ON gpu_allocations
    FOR EACH ROW EXECUTE FUNCTION cohort_gpu_allocated();

CREATE TRIGGER gpu_allocations_count_update
    AFTER UPDATE OF gpu_id ON gpu_allocations
    FOR EACH ROW WHEN (OLD.gpu_id IS DISTINCT FROM NEW.gpu_id)
    EXECUTE FUNCTION cohort_gpu_allocated();

-- Placement reads a node's GPUs, and course pages a course's instances.
CREATE INDEX gpus_node ON gpus (node_id);
CREATE INDEX instances_course ON instances (course_id) WHERE course_id IS NOT NULL;
