ALTER TABLE courses DROP COLUMN processes;
