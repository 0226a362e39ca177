-- Placement's statements as functions, so PostgreSQL plans them once per session instead of on
-- every placement (a statement sent as text is parsed and planned each time; planning the
-- candidate query cost more than running it), and one try (lock the best node, take its GPU
-- slots and a port) is one round trip instead of five. `controller/src/placement.rs` drives the
-- passes and calls `cohort_place_try` once per try.

-- Whether node `n` can take an instance of this size by its committed counters. Plain SQL, so the
-- planner inlines it into the queries below, where it filters the shortlist and re-checks the
-- locked row.
CREATE FUNCTION cohort_node_fits(
    n nodes, pinned BIGINT, gpu_count INTEGER, cpu INTEGER, cpu_overcommit DOUBLE PRECISION,
    memory_mib BIGINT, memory_overcommit DOUBLE PRECISION, disk_gib BIGINT,
    disk_overcommit DOUBLE PRECISION, tried BIGINT[]
) RETURNS BOOLEAN LANGUAGE sql STABLE AS $$
    SELECT n.state = 'online' AND (pinned IS NULL OR n.id = pinned)
        AND (gpu_count = 0 OR n.nvidia_runtime)
        AND n.cpu_used + cpu <= n.cores * cpu_overcommit
        AND n.memory_bytes >= 1048576
        AND n.memory_used_mib + memory_mib <= (n.memory_bytes / 1048576) * memory_overcommit
        AND n.disk_used_gib + disk_gib <= (n.disk_total_bytes / 1073741824) * disk_overcommit
        AND n.instance_count <= n.ssh_port_last - n.ssh_port_first
        AND n.id <> ALL (tried)
$$;

-- One try at placing instance `p_instance`: finds and locks the best node by the committed
-- counters (holding the image first, then by memory left after placing: most first to spread,
-- least first to pack), skipping nodes other transactions hold unless `p_wait`; then gives the
-- instance its GPU slots (distinct GPUs of the model asked for, exclusive ones for
-- `p_exclusive`, the least used first, each at its lowest free slot) and the lowest free port of
-- the node's range. The GPU test (a count over the node's GPUs) runs only on the `p_shortlist`
-- best by the cheap tests. The filter is repeated on the locked row, so a node another placement
-- changed while this one waited is re-checked on its newest counters.
--
-- Returns a NULL `placed_node` when no node fits; the node and a NULL `placed_port` when the
-- locked node could not take the instance after all (the GPU test ran on a snapshot): its slots
-- and lock are let go with the block's subtransaction, and the caller tries again without it.
--
-- The plans are generic (the same for every argument), which PostgreSQL would pick by itself
-- after five custom ones; forcing it keeps the candidate query from being planned per call.
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
