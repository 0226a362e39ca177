-- Lock order and retention (issue 42).
--
-- One lock order: instances (by id), then nodes (by id), then gpus. A move changes an
-- instance's node: its usage trigger took the old node's row, then the new one's, so two moves
-- in opposite directions could deadlock. The trigger now locks both nodes in id order first.
CREATE OR REPLACE FUNCTION cohort_node_usage() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.node_id IS NOT NULL AND NEW.node_id IS NOT NULL
       AND OLD.node_id <> NEW.node_id THEN
        PERFORM 1 FROM nodes WHERE id IN (OLD.node_id, NEW.node_id) ORDER BY id
            FOR NO KEY UPDATE;
    END IF;
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

-- Foreign keys whose referenced rows are deleted on hot paths: without an index each delete
-- of the referenced row scans the referencing table (an instance's delete scanned every
-- operation item ever made).
CREATE INDEX operation_items_instance ON operation_items (instance_id)
    WHERE instance_id IS NOT NULL;
CREATE INDEX node_images_image ON node_images (image_id);
CREATE INDEX instances_image ON instances (image_id);
CREATE INDEX operations_created_by ON operations (created_by) WHERE created_by IS NOT NULL;
CREATE INDEX enrollments_user ON enrollments (user_id);

-- The pruner's scan of finished operations by age.
CREATE INDEX operations_finished ON operations (finished_at) WHERE finished_at IS NOT NULL;
