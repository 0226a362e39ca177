-- Placement as it is now: the current definition of every function placement runs in
-- PostgreSQL, in one place to read. The migrations made them step by step (placement_functions,
-- placement_window, placement_insert, course_gpu_share, create_orphans, count_homes_and_pools,
-- remember_busy_nodes, gpu_share_cap, place_class, class_claims_nodes); a test
-- (`controller_placement::the_placement_sql_is_what_the_migrations_leave`) checks that this
-- file defines exactly what they leave in the database, so a migration that changes placement
-- changes this file too. `controller/src/placement.rs` drives the passes and calls
-- `cohort_place_try` once per try, or `cohort_place_class` once for a class; both place through
-- `cohort_place_on`.
--
-- The counters these read (`nodes.cpu_used`, `memory_used_mib`, `disk_used_gib` (root disks and
-- homes), `instance_count`, `gpus.allocated`, `gpus.share_cap`) are kept by triggers
-- (migrations placement_counters, count_homes_and_pools, gpu_share_cap); `pool_used_bytes` and
-- `pool_total_bytes` by the poller.

-- Whether node `n` can take an instance of this size by its committed counters. Plain SQL, so the
-- planner inlines it into the queries below, where it filters the shortlist and re-checks the
-- locked row. `disk_gib` is the root disk and the home together; the node's storage pool must
-- keep a tenth free once they are full (by the use its agent last reported; 0 total: not
-- reported, not checked).
CREATE OR REPLACE FUNCTION cohort_node_fits(
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
        AND (n.pool_total_bytes = 0
             OR n.pool_used_bytes + disk_gib * 1073741824 <= n.pool_total_bytes * 0.9)
        AND n.instance_count <= n.ssh_port_last - n.ssh_port_first
        AND n.id <> ALL (tried)
$$;

CREATE OR REPLACE FUNCTION cohort_node_load(memory_used_mib BIGINT, memory_bytes BIGINT)
RETURNS DOUBLE PRECISION LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT memory_used_mib::float8 / greatest(memory_bytes / 1048576, 1)
$$;

-- How many containers GPU `g` may hold with one more whose N is `p_share` (NULL: none of
-- its own): LEAST ignores NULLs, so an uncapped GPU's room is its share_limit.
-- (`share_cap`, kept with `allocated` by the allocation trigger, is the lowest N of the
-- containers on the GPU.) One expression, inlined where it is used: the subquery it once held
-- kept it from being inlined, and counting a node's free GPUs ran it once per GPU.
CREATE OR REPLACE FUNCTION cohort_gpu_room(g gpus, p_share INTEGER)
RETURNS INTEGER LANGUAGE sql IMMUTABLE AS $$
    SELECT LEAST(g.share_limit, p_share, g.share_cap)
$$;

-- The GPUs of node `p_node` with room for one more container of N `p_share`.
CREATE OR REPLACE FUNCTION cohort_node_free_gpus(p_node BIGINT, p_model TEXT, p_exclusive BOOLEAN,
                                      p_share INTEGER)
RETURNS BIGINT LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT count(*) FROM gpus g
            WHERE g.node_id = p_node AND g.present
              AND g.allocated < cohort_gpu_room(g, p_share)
              AND (p_model IS NULL OR g.model = p_model)
              AND (NOT p_exclusive OR g.share_limit = 1));
END
$$;

-- The window a first pass ranks: `p_size` of the least loaded online nodes (most loaded, to
-- pack) and as many of those holding image `p_image`, leaving out `p_busy`. Ordered index scans
-- with a LIMIT; the ids then go through the primary key. (One query with the fit filter in it is
-- planned as a scan of every node: the planner cannot tell how many nodes the filter keeps.)
-- Like cohort_place_on, it runs under the settings of its callers, the placement functions.
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

-- Where a node stands for an instance of `p_memory_mib`, lowest first: its memory in use with
-- the instance, of what it may hold; the most loaded first to pack. Inlined into the rankings.
CREATE OR REPLACE FUNCTION cohort_node_rank(n nodes, p_pack BOOLEAN, p_memory_mib BIGINT,
                                 p_memory_overcommit DOUBLE PRECISION)
RETURNS DOUBLE PRECISION LANGUAGE sql IMMUTABLE AS $$
    SELECT (CASE WHEN p_pack THEN -1 ELSE 1 END) * (n.memory_used_mib + p_memory_mib)
           / ((n.memory_bytes / 1048576) * p_memory_overcommit)
$$;

-- As the remember_busy_nodes migration made it: the nodes a transaction found held are skipped
-- by its later tries.
-- One try at placing instance `p_instance`, or the new row `p_row` when that is NULL: finds and
-- locks the best node of the window (all nodes when `p_shortlist` is NULL) by the committed
-- counters, skipping nodes other transactions hold unless `p_wait`; then gives the instance its
-- GPU slots (distinct GPUs of the model asked for, exclusive ones for `p_exclusive`, the least
-- used first, each at its lowest free slot) and the lowest free port of the node's range. The
-- GPU test runs on the ranked nodes in order until one passes. The filter is repeated on the
-- locked row, so a node another placement changed while this one waited is re-checked on its
-- newest counters. The new row takes its columns from `p_row` by name (those of `NewInstance`);
-- its node, port and `pending` state from here.
--
-- Returns a NULL `placed_node` when no node fits; the node and a NULL `placed_port` when the
-- locked node could not take the instance after all (its GPUs changed since the ranking read
-- them): nothing was written, and the caller tries again without it. Otherwise
-- `placed_instance` is the instance's id.
--
-- The plans are generic (the same for every argument), which PostgreSQL would pick by itself
-- after five custom ones; forcing it keeps the queries from being planned per call. They are
-- made with sequential scans off: every statement here reads rows by a key, and a session keeps
-- its plans, so one made while a table was nearly empty (a new lab's first class) scanned the
-- whole table on every later call once it had grown (the foreign-key checks of the inserts here,
-- planned on a connection's first placement, too: benchmark 2, gpu_share_cap).
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

-- Places instance `p_instance`, or the new row `p_row` when that is NULL, on `p_node`, a node
-- row the caller has locked and found fitting: the lowest free port of its range, and GPU slots
-- (distinct GPUs of the model asked for, exclusive ones for `p_exclusive`, the least used first,
-- each at its lowest free slot). All NULL, with nothing written, when the node could not take it
-- after all (no port free, or its GPUs changed since the caller read them). Its plans are made
-- under the settings of its callers (generic, no sequential scans: see cohort_place_try); a
-- SET of its own would be undone and done again on every call.
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

-- A class (the new students of a course's provision) in one statement. To spread, the class
-- first claims as many nodes as it has rows: the best of the window that fit a row (GPUs too),
-- locked at once, skipping those other transactions hold. Each row then goes to the best claimed
-- node that still fits it, re-read with what the class put there: while a claimed node has
-- nothing of the class, it ranks no worse than any node left out of the claim, so the rows land
-- where one try each would have put them, without ranking the window again per row. (Packing
-- claims nothing first: its rows fill the node the first try found.) A row no claimed node can
-- take gets the passes and tries `placement.rs` drives for one instance (pass 0 ranks the window,
-- 1 every node, 2 every node waiting for its lock), and the node it lands on joins the claim.
-- One row out per row in, in order; NULLs for a row no node can hold now, which the caller
-- writes queued.
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
