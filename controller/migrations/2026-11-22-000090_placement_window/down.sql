DROP FUNCTION cohort_place_try(BIGINT, BIGINT, INTEGER, INTEGER, BIGINT, BIGINT, TEXT, BOOLEAN,
    BIGINT, BOOLEAN, DOUBLE PRECISION, DOUBLE PRECISION, DOUBLE PRECISION, BIGINT, BOOLEAN,
    BIGINT[]);
DROP FUNCTION cohort_node_free_gpus(BIGINT, TEXT, BOOLEAN);
DROP INDEX nodes_load;
DROP FUNCTION cohort_node_load(BIGINT, BIGINT);

-- The function as the placement_functions migration made it.
CREATE FUNCTION cohort_place_try(
    p_instance BIGINT, p_pinned BIGINT, p_gpu_count INTEGER, p_cpu INTEGER,
    p_memory_mib BIGINT, p_disk_gib BIGINT, p_gpu_model TEXT, p_exclusive BOOLEAN,
    p_image BIGINT, p_pack BOOLEAN, p_cpu_overcommit DOUBLE PRECISION,
    p_memory_overcommit DOUBLE PRECISION, p_disk_overcommit DOUBLE PRECISION,
    p_shortlist BIGINT, p_wait BOOLEAN, p_tried BIGINT[],
    OUT placed_node BIGINT, OUT placed_node_name TEXT, OUT placed_port INTEGER,
    OUT placed_gpus BIGINT[], OUT placed_slots INTEGER[]
) LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    node RECORD;
BEGIN
    BEGIN
        IF p_wait THEN
            SELECT n.id, n.name, n.ssh_port_first, n.ssh_port_last INTO node
            FROM nodes n JOIN (
                SELECT m.id,
                       m.id IN (SELECT ni.node_id FROM node_images ni
                                WHERE ni.image_id = p_image) AS holds,
                       (CASE WHEN p_pack THEN -1 ELSE 1 END) * (m.memory_used_mib + p_memory_mib)
                         / ((m.memory_bytes / 1048576) * p_memory_overcommit) AS score
                FROM nodes m
                WHERE cohort_node_fits(m, p_pinned, p_gpu_count, p_cpu, p_cpu_overcommit,
                                       p_memory_mib, p_memory_overcommit, p_disk_gib,
                                       p_disk_overcommit, p_tried)
                ORDER BY holds DESC, score, m.id
                LIMIT p_shortlist
            ) c ON c.id = n.id
            WHERE cohort_node_fits(n, p_pinned, p_gpu_count, p_cpu, p_cpu_overcommit,
                                   p_memory_mib, p_memory_overcommit, p_disk_gib,
                                   p_disk_overcommit, p_tried)
              AND (p_gpu_count = 0
                   OR (SELECT count(*) FROM gpus g WHERE g.node_id = n.id AND g.present
                       AND g.allocated < g.share_limit
                       AND (p_gpu_model IS NULL OR g.model = p_gpu_model)
                       AND (NOT p_exclusive OR g.share_limit = 1)) >= p_gpu_count)
            ORDER BY c.holds DESC, c.score, n.id
            LIMIT 1 FOR UPDATE OF n;
        ELSE
            SELECT n.id, n.name, n.ssh_port_first, n.ssh_port_last INTO node
            FROM nodes n JOIN (
                SELECT m.id,
                       m.id IN (SELECT ni.node_id FROM node_images ni
                                WHERE ni.image_id = p_image) AS holds,
                       (CASE WHEN p_pack THEN -1 ELSE 1 END) * (m.memory_used_mib + p_memory_mib)
                         / ((m.memory_bytes / 1048576) * p_memory_overcommit) AS score
                FROM nodes m
                WHERE cohort_node_fits(m, p_pinned, p_gpu_count, p_cpu, p_cpu_overcommit,
                                       p_memory_mib, p_memory_overcommit, p_disk_gib,
                                       p_disk_overcommit, p_tried)
                ORDER BY holds DESC, score, m.id
                LIMIT p_shortlist
            ) c ON c.id = n.id
            WHERE cohort_node_fits(n, p_pinned, p_gpu_count, p_cpu, p_cpu_overcommit,
                                   p_memory_mib, p_memory_overcommit, p_disk_gib,
                                   p_disk_overcommit, p_tried)
              AND (p_gpu_count = 0
                   OR (SELECT count(*) FROM gpus g WHERE g.node_id = n.id AND g.present
                       AND g.allocated < g.share_limit
                       AND (p_gpu_model IS NULL OR g.model = p_gpu_model)
                       AND (NOT p_exclusive OR g.share_limit = 1)) >= p_gpu_count)
            ORDER BY c.holds DESC, c.score, n.id
            LIMIT 1 FOR UPDATE OF n SKIP LOCKED;
        END IF;
        IF NOT FOUND THEN
            RETURN;
        END IF;
        placed_node := node.id;
        placed_node_name := node.name;

        placed_gpus := '{}';
        placed_slots := '{}';
        IF p_gpu_count > 0 THEN
            WITH taken AS (
                INSERT INTO gpu_allocations (gpu_id, share_limit, slot, instance_id)
                SELECT g.id, g.share_limit,
                       (SELECT min(s)::int4 FROM generate_series(0, g.share_limit - 1) AS s
                        WHERE NOT EXISTS (SELECT 1 FROM gpu_allocations a
                                          WHERE a.gpu_id = g.id AND a.slot = s)),
                       p_instance
                FROM gpus g
                WHERE g.node_id = node.id AND g.present AND g.allocated < g.share_limit
                  AND (p_gpu_model IS NULL OR g.model = p_gpu_model)
                  AND (NOT p_exclusive OR g.share_limit = 1)
                ORDER BY g.allocated, g.idx
                LIMIT p_gpu_count
                RETURNING gpu_id, slot
            )
            SELECT coalesce(array_agg(gpu_id), '{}'), coalesce(array_agg(slot), '{}')
            INTO placed_gpus, placed_slots
            FROM taken;
            IF cardinality(placed_gpus) < p_gpu_count THEN
                RAISE SQLSTATE 'CP001';
            END IF;
        END IF;

        -- The lowest port of the range no instance holds: the range's first port or one past a
        -- taken one, whichever is lowest and free.
        UPDATE instances SET node_id = node.id, observed_state = 'pending', ssh_port = free.port
        FROM (
            SELECT min(c.p) AS port FROM (
                SELECT node.ssh_port_first AS p
                UNION ALL SELECT i.ssh_port + 1 FROM instances i
                          WHERE i.node_id = node.id
                            AND i.ssh_port BETWEEN node.ssh_port_first AND node.ssh_port_last
            ) c
            WHERE c.p <= node.ssh_port_last
              AND NOT EXISTS (SELECT 1 FROM instances i
                              WHERE i.node_id = node.id AND i.ssh_port = c.p)
        ) free
        WHERE instances.id = p_instance AND free.port IS NOT NULL
        RETURNING free.port INTO placed_port;
        IF placed_port IS NULL THEN
            RAISE SQLSTATE 'CP001';
        END IF;
    EXCEPTION WHEN SQLSTATE 'CP001' THEN
        placed_port := NULL;
        placed_gpus := NULL;
        placed_slots := NULL;
    END;
END
$$;
