-- A node's SSH port is given to one container at a time, whatever gives it: two instances can
-- never share one (instances_node_ssh_port), and no instance takes a port a container Cohort has
-- no row for still forwards (an orphan): the database refuses it, as a unique violation of
-- `instances_port_held_by_orphan`, whatever the caller checked before.
CREATE FUNCTION cohort_port_not_orphaned() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM orphans o
               WHERE o.node_id = NEW.node_id AND o.ssh_port = NEW.ssh_port) THEN
        RAISE EXCEPTION 'port % of node % is still forwarded to an orphan container',
                        NEW.ssh_port, NEW.node_id
            USING ERRCODE = 'unique_violation', CONSTRAINT = 'instances_port_held_by_orphan';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER instances_port_held_by_orphan
    BEFORE INSERT OR UPDATE OF node_id, ssh_port ON instances
    FOR EACH ROW WHEN (NEW.ssh_port IS NOT NULL)
    EXECUTE FUNCTION cohort_port_not_orphaned();
