-- When a running container's GPUs were last put back on it (Attach a GPU again, a lease granted,
-- a budget's detach lifted): the reclaimer's idle window starts again there, so GPUs given back
-- a moment ago are not taken again for the idleness before (issue 43).
ALTER TABLE instance_usage ADD COLUMN gpus_attached_at TIMESTAMPTZ;
