-- The transactions that changed what a page of instances shows: each leaves its id here once,
-- from a statement trigger on every table the page reads, so a controller can tell whether a
-- page it read under an earlier snapshot is still what the database holds
-- (controller/src/page_cache.rs). Pruned by the controller once no kept page can need an id.
CREATE TABLE inventory_writes (
    xid xid8 PRIMARY KEY
);

CREATE FUNCTION cohort_note_inventory_write() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO inventory_writes (xid) VALUES (pg_current_xact_id()) ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

CREATE TRIGGER inventory_write AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON instances
    FOR EACH STATEMENT EXECUTE FUNCTION cohort_note_inventory_write();
CREATE TRIGGER inventory_write AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON instance_usage
    FOR EACH STATEMENT EXECUTE FUNCTION cohort_note_inventory_write();
CREATE TRIGGER inventory_write AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON gpu_allocations
    FOR EACH STATEMENT EXECUTE FUNCTION cohort_note_inventory_write();
CREATE TRIGGER inventory_write AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON gpus
    FOR EACH STATEMENT EXECUTE FUNCTION cohort_note_inventory_write();
CREATE TRIGGER inventory_write AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON nodes
    FOR EACH STATEMENT EXECUTE FUNCTION cohort_note_inventory_write();
CREATE TRIGGER inventory_write AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON images
    FOR EACH STATEMENT EXECUTE FUNCTION cohort_note_inventory_write();
CREATE TRIGGER inventory_write AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON courses
    FOR EACH STATEMENT EXECUTE FUNCTION cohort_note_inventory_write();
CREATE TRIGGER inventory_write AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON users
    FOR EACH STATEMENT EXECUTE FUNCTION cohort_note_inventory_write();
