DELETE FROM reclaim_warnings WHERE reason IN ('lease_end', 'budget');
ALTER TABLE reclaim_warnings DROP CONSTRAINT reclaim_warnings_reason_check;
ALTER TABLE reclaim_warnings
    ADD CONSTRAINT reclaim_warnings_reason_check CHECK (reason IN ('idle', 'max_runtime'));
