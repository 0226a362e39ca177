ALTER TABLE join_tokens DROP COLUMN addresses;
