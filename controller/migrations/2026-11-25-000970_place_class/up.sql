-- A class placed in one statement: every student of a course's provision, the passes and tries
-- `placement.rs` drives for one instance, run here for each new row in turn. A class placed
-- statement by statement held each node it had placed on (and kept back the pruning of every
-- node row version) for a round trip to the controller per student; in one statement it holds
-- them only as long as the placements themselves take (issue 32, item 4).
CREATE FUNCTION cohort_place_class(
    p_rows JSONB[], p_gpu_count INTEGER, p_cpu INTEGER, p_memory_mib BIGINT, p_disk_gib BIGINT,
    p_gpu_model TEXT, p_exclusive BOOLEAN, p_image BIGINT, p_pack BOOLEAN,
    p_cpu_overcommit DOUBLE PRECISION, p_memory_overcommit DOUBLE PRECISION,
    p_disk_overcommit DOUBLE PRECISION, p_share INTEGER, p_window BIGINT,
    p_tries_per_pass INTEGER
) RETURNS TABLE (
    placed_instance BIGINT, placed_node BIGINT, placed_node_name TEXT, placed_port INTEGER,
    placed_gpus BIGINT[], placed_slots INTEGER[], placed_pass INTEGER
) LANGUAGE plpgsql AS $$
DECLARE
    try RECORD;
    tried BIGINT[];
BEGIN
    FOR i IN 1 .. coalesce(cardinality(p_rows), 0) LOOP
        placed_instance := NULL;
        placed_node := NULL;
        placed_node_name := NULL;
        placed_port := NULL;
        placed_gpus := NULL;
        placed_slots := NULL;
        placed_pass := NULL;
        tried := '{}';
        -- Pass 0 ranks the window, 1 every node, 2 every node waiting for its lock; a try that
        -- finds no node ends its pass, one whose node could not take the row after all tries
        -- again without that node.
        <<passes>>
        FOR pass IN 0 .. 2 LOOP
            FOR n IN 1 .. p_tries_per_pass LOOP
                SELECT * INTO try FROM cohort_place_try(
                    NULL, NULL, p_gpu_count, p_cpu, p_memory_mib, p_disk_gib, p_gpu_model,
                    p_exclusive, p_image, p_pack, p_cpu_overcommit, p_memory_overcommit,
                    p_disk_overcommit, CASE WHEN pass = 0 THEN p_window END, pass = 2, tried,
                    p_rows[i], p_share);
                EXIT WHEN try.placed_node IS NULL;
                IF try.placed_instance IS NULL THEN
                    tried := tried || try.placed_node;
                    CONTINUE;
                END IF;
                placed_instance := try.placed_instance;
                placed_node := try.placed_node;
                placed_node_name := try.placed_node_name;
                placed_port := try.placed_port;
                placed_gpus := try.placed_gpus;
                placed_slots := try.placed_slots;
                placed_pass := pass;
                EXIT passes;
            END LOOP;
        END LOOP;
        RETURN NEXT;
    END LOOP;
END
$$;
