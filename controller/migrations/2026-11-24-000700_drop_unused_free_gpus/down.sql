-- The three-argument form, as placement_window made it (course_gpu_share's down calls it).
CREATE FUNCTION cohort_node_free_gpus(p_node BIGINT, p_model TEXT, p_exclusive BOOLEAN)
RETURNS BIGINT LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT count(*) FROM gpus g
            WHERE g.node_id = p_node AND g.present AND g.allocated < g.share_limit
              AND (p_model IS NULL OR g.model = p_model)
              AND (NOT p_exclusive OR g.share_limit = 1));
END
$$;
