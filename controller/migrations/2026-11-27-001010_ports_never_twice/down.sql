DROP TRIGGER instances_port_held_by_orphan ON instances;
DROP FUNCTION cohort_port_not_orphaned();
