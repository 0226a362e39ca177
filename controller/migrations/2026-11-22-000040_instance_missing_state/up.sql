-- `missing`: the node answers but its LXD no longer has the container (drift).
ALTER TABLE instances DROP CONSTRAINT instances_observed_state_check;
ALTER TABLE instances ADD CONSTRAINT instances_observed_state_check
    CHECK (observed_state IN ('queued', 'pending', 'running', 'stopped', 'unknown', 'missing', 'error'));
