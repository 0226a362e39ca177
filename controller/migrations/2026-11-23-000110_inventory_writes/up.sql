-- The transactions that changed what a page of instances shows: each leaves its id here once,
-- from a statement trigger on every table the page reads, so a controller can tell whether a
-- page it read under an earlier snapshot is still what the database holds
-- (controller/src/page_cache.rs). Pruned by the controller once no kept page can need an id.
CREATE TABLE inventory_writes (
    xid xid8 PRIMARY KEY
);

-- Once a transaction: a placement changes three of these tables, and a second insert of the same
-- id would only find the first. The mark is a transaction-local setting, so a subtransaction
-- rolled back with its insert takes the mark with it.
CREATE FUNCTION cohort_note_inventory_write() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('cohort.inventory_noted', true) = 'yes' THEN
        RETURN NULL;
    END IF;
    INSERT INTO inventory_writes (xid) VALUES (pg_current_xact_id()) ON CONFLICT DO NOTHING;
    PERFORM set_config('cohort.inventory_noted', 'yes', true);
    RETURN NULL;
END
$$;

-- The tables a page of instances shows.
DO $$
DECLARE
    shown TEXT;
BEGIN
    FOREACH shown IN ARRAY ARRAY['instances', 'instance_usage', 'gpu_allocations', 'gpus', 'nodes',
                                 'images', 'courses', 'users'] LOOP
        EXECUTE format('CREATE TRIGGER inventory_write AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE '
                       'ON %I FOR EACH STATEMENT EXECUTE FUNCTION cohort_note_inventory_write()',
                       shown);
    END LOOP;
END
$$;
