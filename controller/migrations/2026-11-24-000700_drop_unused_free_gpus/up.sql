-- course_gpu_share made cohort_node_free_gpus take the instance's share count and kept the
-- three-argument form only for its own down. Nothing calls it; drop it, so placement's functions
-- are the ones controller/src/placement.sql defines and no other.
DROP FUNCTION cohort_node_free_gpus(BIGINT, TEXT, BOOLEAN);
