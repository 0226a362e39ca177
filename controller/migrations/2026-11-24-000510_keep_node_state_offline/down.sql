ALTER TABLE nodes DROP COLUMN state_before_offline;
