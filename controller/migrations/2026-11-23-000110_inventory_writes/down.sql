DO $$
DECLARE
    shown TEXT;
BEGIN
    FOREACH shown IN ARRAY ARRAY['instances', 'instance_usage', 'gpu_allocations', 'gpus', 'nodes',
                                 'images', 'courses', 'users'] LOOP
        EXECUTE format('DROP TRIGGER inventory_write ON %I', shown);
    END LOOP;
END
$$;
DROP FUNCTION cohort_note_inventory_write();
DROP TABLE inventory_writes;
