UPDATE instances SET observed_state = 'error' WHERE observed_state = 'missing';
ALTER TABLE instances DROP CONSTRAINT instances_observed_state_check;
ALTER TABLE instances ADD CONSTRAINT instances_observed_state_check
    CHECK (observed_state IN ('queued', 'pending', 'running', 'stopped', 'unknown', 'error'));
