-- A class claims its nodes once (issue 32, item 4). cohort_place_class ranked the window and
-- walked it for every row, as a try for one instance does; it now locks as many of the best
-- nodes as the class has rows in one statement and gives each row the best of those that still
-- fits it, falling back to the tries only for a row none of them can take. The window query and
-- the ranking move into functions of their own (cohort_node_window, cohort_node_rank), and what
-- a try does once it holds a node into cohort_place_on, so the class and the tries share them.

CREATE OR REPLACE FUNCTION cohort_node_window(p_image BIGINT, p_pack BOOLEAN, p_size BIGINT,
                                   p_busy BIGINT[])
RETURNS BIGINT[] LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_pack THEN
        RETURN ARRAY(
            (SELECT m.id FROM nodes m
               JOIN node_images ni ON ni.node_id = m.id AND ni.image_id = p_image
             WHERE m.state = 'online' AND m.id NOT IN (SELECT unnest(p_busy))
             ORDER BY cohort_node_load(m.memory_used_mib, m.memory_bytes) DESC, m.id DESC
             LIMIT p_size)
            UNION
            (SELECT m.id FROM nodes m
             WHERE m.state = 'online' AND m.id NOT IN (SELECT unnest(p_busy))
             ORDER BY cohort_node_load(m.memory_used_mib, m.memory_bytes) DESC, m.id DESC
             LIMIT p_size));
    END IF;
    RETURN ARRAY(
        (SELECT m.id FROM nodes m
           JOIN node_images ni ON ni.node_id = m.id AND ni.image_id = p_image
         WHERE m.state = 'online' AND m.id NOT IN (SELECT unnest(p_busy))
         ORDER BY cohort_node_load(m.memory_used_mib, m.memory_bytes), m.id
         LIMIT p_size)
        UNION
        (SELECT m.id FROM nodes m
         WHERE m.state = 'online' AND m.id NOT IN (SELECT unnest(p_busy))
         ORDER BY cohort_node_load(m.memory_used_mib, m.memory_bytes), m.id
         LIMIT p_size));
END
$$;

CREATE OR REPLACE FUNCTION cohort_node_rank(n nodes, p_pack BOOLEAN, p_memory_mib BIGINT,
                                 p_memory_overcommit DOUBLE PRECISION)
RETURNS DOUBLE PRECISION LANGUAGE sql IMMUTABLE AS $$
    SELECT (CASE WHEN p_pack THEN -1 ELSE 1 END) * (n.memory_used_mib + p_memory_mib)
           / ((n.memory_bytes / 1048576) * p_memory_overcommit)
$$;

CREATE OR REPLACE FUNCTION cohort_place_on(
    p_node nodes, p_instance BIGINT, p_gpu_count INTEGER, p_gpu_model TEXT, p_exclusive BOOLEAN,
    p_row JSONB, p_share INTEGER,
    OUT placed_instance BIGINT, OUT placed_port INTEGER, OUT placed_gpus BIGINT[],
    OUT placed_slots INTEGER[]
) LANGUAGE plpgsql AS $$
BEGIN
    -- The lowest port of the range no instance holds. Ports are taken lowest first, so the
    -- node's instances usually hold exactly the first `instance_count` ports of the range, and
    -- the next is free: then the probe for a taken port at or past it meets no entry of the
    -- node's port index and reads no row (the highest taken port, as before, had to read its
    -- row, on the heap page every concurrent placement was writing). Otherwise the first port,
    -- or one past the first taken port (in the order of the port index) whose successor is free.
    placed_port := p_node.ssh_port_first + p_node.instance_count;
    IF placed_port > p_node.ssh_port_last
       OR EXISTS (SELECT 1 FROM instances i
                  WHERE i.node_id = p_node.id
                    AND i.ssh_port BETWEEN placed_port AND p_node.ssh_port_last) THEN
        placed_port := CASE
            WHEN NOT EXISTS (SELECT 1 FROM instances i
                             WHERE i.node_id = p_node.id AND i.ssh_port = p_node.ssh_port_first)
                THEN p_node.ssh_port_first
            ELSE (SELECT t.port + 1 FROM (
                      SELECT i.ssh_port AS port,
                             lead(i.ssh_port) OVER (ORDER BY i.ssh_port) AS next_port
                      FROM instances i
                      WHERE i.node_id = p_node.id
                        AND i.ssh_port BETWEEN p_node.ssh_port_first AND p_node.ssh_port_last
                  ) t
                  WHERE t.next_port IS DISTINCT FROM t.port + 1
                  ORDER BY t.port
                  LIMIT 1)
        END;
    END IF;
    -- A port a container Cohort has no row for still forwards (see `orphans`): never again.
    IF placed_port IS NOT NULL
       AND EXISTS (SELECT 1 FROM orphans o
                   WHERE o.node_id = p_node.id AND o.ssh_port = placed_port) THEN
        placed_port := (SELECT p FROM generate_series(p_node.ssh_port_first, p_node.ssh_port_last) p
                        WHERE NOT EXISTS (SELECT 1 FROM instances i
                                          WHERE i.node_id = p_node.id AND i.ssh_port = p)
                          AND NOT EXISTS (SELECT 1 FROM orphans o
                                          WHERE o.node_id = p_node.id AND o.ssh_port = p)
                        ORDER BY p LIMIT 1);
    END IF;
    IF placed_port IS NULL OR placed_port > p_node.ssh_port_last
       OR (p_gpu_count > 0
           AND cohort_node_free_gpus(p_node.id, p_gpu_model, p_exclusive, p_share)
               < p_gpu_count) THEN
        placed_port := NULL;
        RETURN;
    END IF;

    -- A new instance is written here, placed: one row version, no queue index entry, and the
    -- counters' trigger runs once. The GPU slots need its id, so they follow it.
    IF p_instance IS NULL THEN
        INSERT INTO instances (name, owner_id, course_id, image_id, node_id, ssh_port,
                               desired_state, observed_state, cpu, memory_mib, disk_gib, home_gib,
                               gpu_count, gpu_model, gpu_share, gpu_share_count, strategy,
                               priority, config)
        SELECT r.name, r.owner_id, r.course_id, r.image_id, p_node.id, placed_port,
               r.desired_state, 'pending', r.cpu, r.memory_mib, r.disk_gib, r.home_gib,
               r.gpu_count, r.gpu_model, r.gpu_share, r.gpu_share_count, r.strategy,
               r.priority, r.config
        FROM jsonb_populate_record(NULL::instances, p_row) r
        RETURNING id INTO placed_instance;
    ELSE
        placed_instance := p_instance;
    END IF;

    placed_gpus := '{}';
    placed_slots := '{}';
    IF p_gpu_count > 0 THEN
        WITH taken AS (
            INSERT INTO gpu_allocations (gpu_id, share_limit, slot, instance_id, share_count)
            SELECT g.id, g.share_limit,
                   (SELECT min(s)::int4 FROM generate_series(0, g.share_limit - 1) AS s
                    WHERE NOT EXISTS (SELECT 1 FROM gpu_allocations a
                                      WHERE a.gpu_id = g.id AND a.slot = s)),
                   placed_instance, p_share
            FROM gpus g
            WHERE g.node_id = p_node.id AND g.present
              AND g.allocated < cohort_gpu_room(g, p_share)
              AND (p_gpu_model IS NULL OR g.model = p_gpu_model)
              AND (NOT p_exclusive OR g.share_limit = 1)
            ORDER BY g.allocated, g.idx
            LIMIT p_gpu_count
            RETURNING gpu_id, slot
        )
        SELECT coalesce(array_agg(gpu_id), '{}'), coalesce(array_agg(slot), '{}')
        INTO placed_gpus, placed_slots
        FROM taken;
        -- Only a GPU the node's poller marked absent in between can make this short. What this
        -- try wrote goes (a new row takes its slots with it).
        IF cardinality(placed_gpus) < p_gpu_count THEN
            IF p_instance IS NULL THEN
                DELETE FROM instances WHERE id = placed_instance;
            ELSE
                DELETE FROM gpu_allocations WHERE instance_id = p_instance;
            END IF;
            placed_instance := NULL;
            placed_port := NULL;
            placed_gpus := NULL;
            placed_slots := NULL;
            RETURN;
        END IF;
    END IF;

    IF p_instance IS NOT NULL THEN
        UPDATE instances SET node_id = p_node.id, observed_state = 'pending', ssh_port = placed_port
        WHERE instances.id = p_instance;
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION cohort_place_try(
    p_instance BIGINT, p_pinned BIGINT, p_gpu_count INTEGER, p_cpu INTEGER,
    p_memory_mib BIGINT, p_disk_gib BIGINT, p_gpu_model TEXT, p_exclusive BOOLEAN,
    p_image BIGINT, p_pack BOOLEAN, p_cpu_overcommit DOUBLE PRECISION,
    p_memory_overcommit DOUBLE PRECISION, p_disk_overcommit DOUBLE PRECISION,
    p_shortlist BIGINT, p_wait BOOLEAN, p_tried BIGINT[], p_row JSONB, p_share INTEGER,
    OUT placed_instance BIGINT, OUT placed_node BIGINT, OUT placed_node_name TEXT,
    OUT placed_port INTEGER, OUT placed_gpus BIGINT[], OUT placed_slots INTEGER[]
) LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
DECLARE
    candidates BIGINT[];
    busy BIGINT[];
    ranked BIGINT[];
    pos INTEGER;
    node nodes;
    taken RECORD;
BEGIN
    -- The nodes earlier tries of this transaction found held by other transactions (or without
    -- room for their GPUs): a transaction that places a class holds each node it placed on until
    -- it commits, so those that place classes at once would otherwise each walk every node the
    -- others hold, least loaded first, on every placement (the window then holds nothing free
    -- and every try ranks all nodes). Tries that skip held nodes skip these too; the waiting
    -- pass looks at them again.
    busy := coalesce(nullif(current_setting('cohort.placement_busy', true), ''), '{}')::BIGINT[];
    IF p_wait THEN
        busy := '{}';
    END IF;
    IF p_shortlist IS NULL THEN
        candidates := ARRAY(SELECT m.id FROM nodes m WHERE m.id NOT IN (SELECT unnest(busy)));
    ELSE
        candidates := cohort_node_window(p_image, p_pack, p_shortlist, busy);
    END IF;

    -- The fitting candidates, best first: holding the image, then by the score.
    ranked := ARRAY(
        SELECT m.id FROM nodes m
        WHERE m.id = ANY (candidates)
          AND cohort_node_fits(m, p_pinned, p_gpu_count, p_cpu, p_cpu_overcommit, p_memory_mib,
                               p_memory_overcommit, p_disk_gib, p_disk_overcommit, p_tried)
        ORDER BY EXISTS (SELECT 1 FROM node_images ni
                         WHERE ni.node_id = m.id AND ni.image_id = p_image) DESC,
                 cohort_node_rank(m, p_pack, p_memory_mib, p_memory_overcommit), m.id);
    -- The first of them that takes the instance by its newest row, locked: one no other
    -- transaction holds, or, for `p_wait`, waited for. The GPU test runs only on the nodes walked.
    pos := 0;
    FOR i IN 1 .. coalesce(cardinality(ranked), 0) LOOP
        IF p_wait THEN
            SELECT n.* INTO node
            FROM nodes n
            WHERE n.id = ranked[i]
              AND cohort_node_fits(n, p_pinned, p_gpu_count, p_cpu, p_cpu_overcommit,
                                   p_memory_mib, p_memory_overcommit, p_disk_gib,
                                   p_disk_overcommit, p_tried)
              AND (p_gpu_count = 0
                   OR cohort_node_free_gpus(n.id, p_gpu_model, p_exclusive, p_share) >= p_gpu_count)
            FOR UPDATE OF n;
        ELSE
            SELECT n.* INTO node
            FROM nodes n
            WHERE n.id = ranked[i]
              AND cohort_node_fits(n, p_pinned, p_gpu_count, p_cpu, p_cpu_overcommit,
                                   p_memory_mib, p_memory_overcommit, p_disk_gib,
                                   p_disk_overcommit, p_tried)
              AND (p_gpu_count = 0
                   OR cohort_node_free_gpus(n.id, p_gpu_model, p_exclusive, p_share) >= p_gpu_count)
            FOR UPDATE OF n SKIP LOCKED;
        END IF;
        IF FOUND THEN
            pos := i;
            EXIT;
        END IF;
    END LOOP;
    -- What was walked past is remembered for the rest of the transaction (the waiting pass
    -- walks past only nodes that no longer fit).
    IF NOT p_wait AND (pos > 1 OR (pos = 0 AND cardinality(ranked) > 0)) THEN
        PERFORM set_config('cohort.placement_busy',
                           (busy || ranked[1:CASE WHEN pos = 0 THEN cardinality(ranked)
                                                  ELSE pos - 1 END])::TEXT,
                           true);
    END IF;
    IF pos = 0 THEN
        RETURN;
    END IF;
    placed_node := node.id;
    placed_node_name := node.name;
    -- An assignment, not a query: PL/pgSQL calls the function directly.
    taken := cohort_place_on(node, p_instance, p_gpu_count, p_gpu_model, p_exclusive, p_row,
                             p_share);
    placed_instance := taken.placed_instance;
    placed_port := taken.placed_port;
    placed_gpus := taken.placed_gpus;
    placed_slots := taken.placed_slots;
END
$$;

CREATE OR REPLACE FUNCTION cohort_place_class(
    p_rows JSONB[], p_gpu_count INTEGER, p_cpu INTEGER, p_memory_mib BIGINT, p_disk_gib BIGINT,
    p_gpu_model TEXT, p_exclusive BOOLEAN, p_image BIGINT, p_pack BOOLEAN,
    p_cpu_overcommit DOUBLE PRECISION, p_memory_overcommit DOUBLE PRECISION,
    p_disk_overcommit DOUBLE PRECISION, p_share INTEGER, p_window BIGINT,
    p_tries_per_pass INTEGER
) RETURNS TABLE (
    placed_instance BIGINT, placed_node BIGINT, placed_node_name TEXT, placed_port INTEGER,
    placed_gpus BIGINT[], placed_slots INTEGER[], placed_pass INTEGER
) LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
DECLARE
    claimed BIGINT[] := '{}';
    -- Claimed nodes with no room left for a row of this shape.
    no_room BIGINT[] := '{}';
    ranked BIGINT[];
    node nodes;
    taken RECORD;
    try RECORD;
    tried BIGINT[];
    class_size INTEGER := coalesce(cardinality(p_rows), 0);
BEGIN
    IF NOT p_pack AND class_size > 0 THEN
        ranked := cohort_node_window(p_image, false, greatest(p_window, class_size), '{}');
        claimed := ARRAY(
            SELECT m.id FROM nodes m
            WHERE m.id = ANY (ranked)
              AND cohort_node_fits(m, NULL, p_gpu_count, p_cpu, p_cpu_overcommit, p_memory_mib,
                                   p_memory_overcommit, p_disk_gib, p_disk_overcommit, '{}')
              AND (p_gpu_count = 0
                   OR cohort_node_free_gpus(m.id, p_gpu_model, p_exclusive, p_share) >= p_gpu_count)
            ORDER BY EXISTS (SELECT 1 FROM node_images ni
                             WHERE ni.node_id = m.id AND ni.image_id = p_image) DESC,
                     cohort_node_rank(m, false, p_memory_mib, p_memory_overcommit), m.id
            LIMIT class_size
            FOR UPDATE OF m SKIP LOCKED);
    END IF;
    FOR i IN 1 .. class_size LOOP
        placed_instance := NULL;
        placed_node := NULL;
        placed_node_name := NULL;
        placed_port := NULL;
        placed_gpus := NULL;
        placed_slots := NULL;
        placed_pass := NULL;
        -- The claimed nodes that fit the row, best first; the GPU test only on those walked.
        ranked := ARRAY(
            SELECT m.id FROM nodes m
            WHERE m.id = ANY (claimed)
              AND cohort_node_fits(m, NULL, p_gpu_count, p_cpu, p_cpu_overcommit, p_memory_mib,
                                   p_memory_overcommit, p_disk_gib, p_disk_overcommit, no_room)
            ORDER BY EXISTS (SELECT 1 FROM node_images ni
                             WHERE ni.node_id = m.id AND ni.image_id = p_image) DESC,
                     cohort_node_rank(m, p_pack, p_memory_mib, p_memory_overcommit), m.id);
        FOR j IN 1 .. coalesce(cardinality(ranked), 0) LOOP
            SELECT n.* INTO node FROM nodes n WHERE n.id = ranked[j];
            IF p_gpu_count = 0
               OR cohort_node_free_gpus(node.id, p_gpu_model, p_exclusive, p_share) >= p_gpu_count
            THEN
                taken := cohort_place_on(node, NULL, p_gpu_count, p_gpu_model, p_exclusive,
                                         p_rows[i], p_share);
                placed_instance := taken.placed_instance;
                placed_port := taken.placed_port;
                placed_gpus := taken.placed_gpus;
                placed_slots := taken.placed_slots;
            END IF;
            IF placed_instance IS NOT NULL THEN
                placed_node := node.id;
                placed_node_name := node.name;
                placed_pass := 0;
                EXIT;
            END IF;
            no_room := no_room || node.id;
        END LOOP;
        IF placed_instance IS NULL THEN
            tried := no_room;
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
                    IF NOT placed_node = ANY (claimed) THEN
                        claimed := claimed || placed_node;
                    END IF;
                    EXIT passes;
                END LOOP;
            END LOOP;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;
