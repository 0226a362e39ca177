-- Lease ends and budget detaches are warned like the other reclaims (issue 43): two more
-- reasons a pending warning may have.
ALTER TABLE reclaim_warnings DROP CONSTRAINT reclaim_warnings_reason_check;
ALTER TABLE reclaim_warnings
    ADD CONSTRAINT reclaim_warnings_reason_check
    CHECK (reason IN ('idle', 'max_runtime', 'lease_end', 'budget'));
