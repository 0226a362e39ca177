-- A fencing token per claim: a worker's writes for an operation count only while the
-- operation still carries the token its claim was given, so a run whose lease ran out (a
-- database outage, a paused process) can never renew, record or finish what another claim now
-- runs. The worker's name alone could not tell two runs of one process apart.
ALTER TABLE operations ADD COLUMN claim_token UUID;
-- The claim query looks for earlier unfinished items on the same instance (operations on one
-- instance run in the order they were asked for).
CREATE INDEX operation_items_unfinished_instance ON operation_items (instance_id, operation_id)
    WHERE status IN ('pending', 'running') AND instance_id IS NOT NULL;
