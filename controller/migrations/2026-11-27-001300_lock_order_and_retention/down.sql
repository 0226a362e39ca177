DROP INDEX operations_finished;
DROP INDEX enrollments_user;
DROP INDEX operations_created_by;
DROP INDEX instances_image;
DROP INDEX node_images_image;
DROP INDEX operation_items_instance;

-- As the count_homes_and_pools migration made it.
CREATE OR REPLACE FUNCTION cohort_node_usage() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.node_id IS NOT NULL THEN
        UPDATE nodes SET cpu_used = cpu_used - OLD.cpu,
                         memory_used_mib = memory_used_mib - OLD.memory_mib,
                         disk_used_gib = disk_used_gib - OLD.disk_gib - OLD.home_gib,
                         instance_count = instance_count - 1
        WHERE id = OLD.node_id;
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') AND NEW.node_id IS NOT NULL THEN
        UPDATE nodes SET cpu_used = cpu_used + NEW.cpu,
                         memory_used_mib = memory_used_mib + NEW.memory_mib,
                         disk_used_gib = disk_used_gib + NEW.disk_gib + NEW.home_gib,
                         instance_count = instance_count + 1
        WHERE id = NEW.node_id;
    END IF;
    RETURN NULL;
END
$$;
