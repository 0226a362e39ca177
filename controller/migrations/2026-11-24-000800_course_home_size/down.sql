ALTER TABLE courses DROP COLUMN home_mib;
